"""The Settings page: diagnosis thresholds (saved per log root) and the notification setup.

Flow: ``log_root()`` -> ``notify_status(root)`` (plain logic: find, read, mask) -> show. The thresholds
form saves ``<root>/.monitor/diagnosis.json``, read by the dashboard and the watcher alike; the
notification settings file is only shown and tested here (it holds no secrets, only the names of
the environment variables that do), never written.
"""

from __future__ import annotations

import streamlit as st

from monitor_cb.dashboard.escape import escape_code, escape_markdown
from monitor_cb.dashboard.settings_form import EXAMPLE_TOML, NotifyStatus, notify_status
from monitor_cb.notify.config import ENV_CONFIG
from pages import _shared
from pages._findings import diagnosis_settings_form

TEST_MESSAGE = "test notification from the monitor_cb dashboard"


def settings_page() -> None:
    """The page function given to ``st.Page``."""
    root = _shared.log_root()
    st.title("Settings")
    st.caption(f"Log root: `{escape_code(str(root))}`")
    st.header("Diagnosis thresholds", divider="gray")
    st.caption("Which problems the live page and the watcher look for, and how sure they must be.")
    diagnosis_settings_form(root)
    st.header("Notifications", divider="gray")
    show_notifications(notify_status(root))
    show_delivery(root)


def show_notifications(status: NotifyStatus) -> None:
    """Where the settings are, the channels (secrets masked), errors, and the test button."""
    if status.path is None:
        st.info(
            f"No notification settings. Create `{escape_code(str(status.suggested))}` (or point "
            f"`${ENV_CONFIG}` at a file) with, for example, the settings below; then "
            "`python -m monitor_cb watch` and this page both use it. See docs/NOTIFICATIONS.md.",
            icon=":material/notifications_off:",
        )
        st.code(EXAMPLE_TOML, language="toml")
        return
    origin = f" (from `${ENV_CONFIG}`)" if status.from_env else ""
    st.caption(f"Settings file: `{escape_code(str(status.path))}`{origin}")
    if status.error is not None:
        st.error(escape_markdown(status.error), icon=":material/error:")
        return
    rows = status.channels
    if not rows:
        st.info("The settings file configures no enabled channel.", icon=":material/notifications_off:")
        return
    st.dataframe(rows, hide_index=True, width="stretch")
    if st.button("Send test notification", icon=":material/send:", key="notify_test"):
        send_test(status)


def send_test(status: NotifyStatus) -> None:
    """One test message to every channel now (no retries, bounded by the timeout); one result line each."""
    from monitor_cb.notify.delivery import send_test_notification

    with st.spinner("Sending…"):
        results = send_test_notification(status.config, TEST_MESSAGE)
    for result in results:
        name = escape_markdown(result.channel)
        if result.ok:
            st.success(f"{name}: delivered", icon=":material/check_circle:")
        else:
            # delivery errors are already redacted; a code span keeps them plain text (no autolinked URL)
            st.error(f"{name}: `{escape_code(result.error or 'failed')}`", icon=":material/error:")


def show_delivery(root: object) -> None:
    """What the watcher has not delivered yet, per channel, and its last error; read from its state."""
    from monitor_cb.notify.outbox import delivery_status

    status = delivery_status(root)
    st.subheader("Delivery", divider="gray")
    where = f"`{escape_code(status.path)}`"
    if not status.found:
        st.caption(f"No watcher state at {where} yet: `python -m monitor_cb watch` (run as this user) writes it.")
        return
    st.caption(f"From the watcher's state {where} (this user's; a watcher run with `--state` keeps its own).")
    if status.error is not None:
        st.warning(f"The watcher's state cannot be read: `{escape_code(status.error)}`", icon=":material/warning:")
        return
    if not status.channels:
        st.caption("Nothing has been sent yet.")
        return
    st.dataframe(status.channels, hide_index=True, width="stretch", key="delivery_channels")
    if status.expired:
        st.caption(f"{len(status.expired)} alert(s) given up after the expiry without being delivered:")
        st.dataframe(status.expired, hide_index=True, width="stretch", key="delivery_expired")
