"""AppTest entry: the ranks section of the live page for the first run under $MONITOR_LOGDIR."""

from pages import _shared
from pages._ranks import ranks_section

store = _shared.get_store(str(_shared.log_root()))
run = store.list_runs()[0]
ranks_section(run, store.read(run.id), "step", 0.0)
