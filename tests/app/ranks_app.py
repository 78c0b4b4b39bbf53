"""AppTest entry: the ranks section of the live page for the first run under $MONITOR_LOGDIR."""

from pages import _shared
from pages._ranks import ranks_section

store = _shared.get_store(str(_shared.log_root()))
run = store.list_runs()[0]
ranks_section(store, run, store.read(run.id, rank=min(run.ranks) if len(run.ranks) > 1 else None), "step", 0.0)
