"""Which metrics of a run play which role (training loss, learning rate, ...), from their names (pure).

Every framework names its metrics its own way: our callback and MindFormers write ``loss`` and ``lr``,
HF Trainer ``train/loss`` and ``train/learning_rate``, Lightning ``train_loss`` and ``lr-AdamW``,
YOLOv5 three component losses and no total, ML-Agents ``Losses/Policy Loss``. The pages, tiles and
detectors ask for a *role* and get the metrics that play it in this run, with the reason, so a run
of any of them opens with its loss drawn and is judged on it.

:data:`RULES` is the one table: in order, each rule names a role, whose name it is and the names it
matches (the whole name, as written). A role takes the metrics of its first rule that matches any
metric of the run (all of that rule's matches: YOLO's three losses), except :data:`GATHERED` roles,
which take the matches of every rule (eval metrics). A rule that matches more than :data:`MAX_PLAYERS`
names (``layer.<i>/grad_norm``) names a family, not a role, and is passed over. A name plays one
role at most: the first role in :data:`ROLES` order that takes it. A user's choice
(``?role.loss=train/total``, or the Settings page per log root) replaces a role's metrics; the
reason then says where it was set.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from monitor_cb.names import shown_name

ROLES: tuple[str, ...] = (
    "loss",
    "eval_loss",
    "eval_metric",
    "lr",
    "grad_norm",
    "throughput",
    "step_time",
    "loss_scale",
)
ROLE_LABELS: dict[str, str] = {
    "loss": "loss",
    "eval_loss": "eval loss",
    "eval_metric": "eval metrics",
    "lr": "learning rate",
    "grad_norm": "grad norm",
    "throughput": "throughput",
    "step_time": "step time",
    "loss_scale": "loss scale",
}
GATHERED = frozenset({"eval_metric"})  # every rule's matches, not only the first rule's
MAX_PLAYERS = 16  # a rule matching more names than this names a family, not a role (eval metrics: the first 16)

# Names of evaluation (prefix eval/val/valid/validation/test, or HF's eval_) and of evaluation timing.
_EVAL = r"(?:eval|val|valid|validation|test|evaluation)"
_EVAL_PREFIX = re.compile(rf"(?i)^(?:{_EVAL}(?:[/_.\- ]|\d)|epoch_val_)")  # test100rew: a test result too
_EVAL_TIMING = re.compile(rf"(?i)^{_EVAL}[/_](?:runtime|samples_per_second|steps_per_second|time|duration)$")
_EVAL_SECONDS = re.compile(rf"(?i)^{_EVAL}[/_](?:runtime|time|duration)$")


@dataclass(frozen=True)
class Rule:
    """Names ``pattern`` matches (the whole name) play ``role``; ``source`` says whose names they are."""

    role: str
    source: str
    pattern: re.Pattern[str]
    eval_names: bool = False  # the rule may match names of evaluation (eval roles only)

    def matches(self, name: str) -> bool:
        if self.pattern.fullmatch(name) is None:
            return False
        return self.eval_names or not _EVAL_PREFIX.match(name)


def _rule(role: str, source: str, pattern: str, *, ignore_case: bool = False) -> Rule:
    flags = re.DOTALL | (re.IGNORECASE if ignore_case else 0)  # a name may hold a newline
    return Rule(role, source, re.compile(pattern, flags), eval_names=role in ("eval_loss", "eval_metric"))


OURS = "the format's name (our callback, MindFormers)"
RULES: tuple[Rule, ...] = (
    # training loss
    _rule("loss", "the format's name (our callback, MindFormers, Keras)", r"loss"),
    _rule("loss", "MindSpore SummaryCollector's name", r"loss/auto"),
    _rule("loss", "HF Trainer's name", r"train/loss"),
    _rule("loss", "Lightning's per-step name", r"train_loss_step"),
    _rule("loss", "Lightning's name", r"train_loss"),
    _rule("loss", "Lightning's per-epoch name", r"train_loss_epoch"),
    _rule("loss", "Keras' TensorBoard name", r"epoch_loss"),
    _rule("loss", "Keras' per-batch name", r"batch_loss"),
    _rule("loss", "Ultralytics/YOLOv5's loss components (no total)", r"train/\w+_loss"),
    _rule("loss", "ML-Agents' losses", r"Losses/.+"),
    _rule("loss", "the format's loss components (no total)", r"loss_(?!scale$).+"),
    _rule("loss", "a training loss by its name", r"(?:train|training)[/_.\- ].*loss.*", ignore_case=True),
    _rule("loss", "a loss by its name", r"(?:.*[/_.\- ])?loss(?:[/_.\- ](?!scale).*)?", ignore_case=True),
    # evaluation loss
    _rule("eval_loss", OURS + ", HF Trainer's name", r"eval_loss"),
    _rule("eval_loss", "HF Trainer's name", r"eval/loss"),
    _rule("eval_loss", "Lightning's and Keras' name", r"val_loss"),
    _rule("eval_loss", "Lightning's per-epoch name", r"val_loss_epoch"),
    _rule("eval_loss", "Ultralytics/YOLOv5's loss components", r"val/\w+_loss"),
    _rule("eval_loss", "an evaluation loss by its name", rf"{_EVAL}[/_.\- ].*loss.*", ignore_case=True),
    # evaluation metrics (every rule's matches)
    _rule("eval_metric", OURS + ", HF Trainer's name", r"eval_(?!loss$).+"),
    _rule("eval_metric", "HF Trainer's name", r"eval/(?!loss$).+"),
    _rule("eval_metric", "Lightning's and Keras' name", r"val_(?!loss(?:_epoch|_step)?$).+"),
    _rule("eval_metric", "Ultralytics/YOLOv5's validation metrics", r"metrics/.+"),
    _rule("eval_metric", "ML-Agents' episode reward", r"Environment/Cumulative Reward"),
    _rule("eval_metric", "an evaluation metric by its name", rf"{_EVAL}[/_.\- ](?!.*loss).+", ignore_case=True),
    # learning rate
    _rule("lr", OURS, r"lr(?:_group\d+)?"),
    _rule("lr", "HF Trainer's name", r"train/learning_rate"),
    _rule("lr", "HF Trainer's and Keras' name", r"learning_rate"),
    _rule("lr", "Lightning LearningRateMonitor's name", r"lr-.+"),
    _rule("lr", "Keras' TensorBoard name", r"epoch_(?:learning_rate|lr)"),
    _rule("lr", "YOLOv5's names (one per parameter group)", r"x/lr\d+"),
    _rule("lr", "Ultralytics' names (one per parameter group)", r"lr/pg\d+"),
    _rule("lr", "ML-Agents' name", r"Policy/Learning Rate"),
    _rule(
        "lr",
        "a learning rate by its name",
        r"(?:.*[/_.\- ])?(?:learning[_ \-]?rate|lr)(?:[/_.\- ].*)?",
        ignore_case=True,
    ),
    # gradient norm
    _rule("grad_norm", OURS + ", HF Trainer's JSON name", r"grad_norm"),
    _rule("grad_norm", "HF Trainer's name", r"train/grad_norm"),
    _rule("grad_norm", "Lightning's track_grad_norm name", r"grad_2\.0_norm_total"),
    _rule(
        "grad_norm",
        "a gradient norm by its name",
        r"(?:.*[/_.\- ])?grad(?:ient)?[_ \-]?norm(?:[/_.\- ]total)?",
        ignore_case=True,
    ),
    # throughput
    _rule("throughput", OURS, r"throughput"),
    _rule("throughput", "the format's tokens per second", r"tokens_per_s"),
    _rule("throughput", "Lightning ThroughputMonitor's name", r"train/samples_per_sec"),
    _rule(
        "throughput",
        "a throughput by its name",
        r"(?!train/train_)(?:.*[/_.\- ])?(?:samples|tokens|images|items)[_/ ]?per[_/ ]?(?:s|sec|second)",
        ignore_case=True,
    ),
    # step time
    _rule("step_time", OURS, r"step_time"),
    _rule(
        "step_time",
        "a step time by its name",
        r"(?:.*[/_.\- ])?(?:step|iteration|iter|batch)[_ \-]?time",
        ignore_case=True,
    ),
    # loss scale
    _rule("loss_scale", OURS, r"loss_scale"),
    _rule("loss_scale", "a loss scale by its name", r"(?:.*[/_.\- ])?loss[_ \-]?scale", ignore_case=True),
)


@dataclass(frozen=True)
class Casting:
    """The metrics that play each role in one run, and why (``"HF Trainer's name"``, ``"set in the URL"``).

    Roles no metric plays are absent. ``unknown``: names a user chose that the run does not have.
    """

    metrics: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    why: Mapping[str, str] = field(default_factory=dict)
    unknown: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def of(self, role: str) -> tuple[str, ...]:
        """The metrics playing ``role`` (empty when none does)."""
        return tuple(self.metrics.get(role, ()))

    def first(self, role: str) -> str | None:
        """The first metric playing ``role`` (the one a tile shows), None when none does."""
        found = self.metrics.get(role, ())
        return found[0] if found else None

    def role_of(self, name: str) -> str | None:
        """The role ``name`` plays in this run, None for none."""
        return next((role for role, names in self.metrics.items() if name in names), None)

    def key(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """Hashable: equal for equal castings (figures are cached on it)."""
        return tuple((role, tuple(self.metrics[role])) for role in ROLES if role in self.metrics)

    def lines(self, roles: Iterable[str] = ROLES, limit: int = 3) -> list[str]:
        """One plain-text line per role played: ``"loss: train/loss (HF Trainer's name)"``; names shown safely."""
        out = []
        for role in roles:
            names = self.metrics.get(role)
            if names:
                shown = ", ".join(shown_name(n, 60) for n in names[:limit])
                more = f" and {len(names) - limit} more" if len(names) > limit else ""
                out.append(f"{ROLE_LABELS[role]}: {shown}{more} ({self.why.get(role, '')})")
        for role, names in self.unknown.items():
            out.append(
                f"{ROLE_LABELS.get(role, role)}: {', '.join(shown_name(n, 60) for n in names)} was chosen, "
                "but this run has no such metric"
            )
        return out


# Every rule holds one of these words: a name without any plays no role (most of 10,000 layer metrics).
_ANY_ROLE_WORD = re.compile(r"(?i)loss|lr|learn|grad|throughput|per|time|scale|eval|val|test|metric|reward")


@functools.lru_cache(maxsize=1 << 16)
def _rules_matching(name: str) -> frozenset[int]:
    """Indices into :data:`RULES` of the rules ``name`` matches (cached: a live page asks every refresh)."""
    if not _ANY_ROLE_WORD.search(name):
        return frozenset()
    found = {i for i, rule in enumerate(RULES) if rule.matches(name)}
    if _EVAL_TIMING.match(name):  # eval_runtime and the like: timing of the evaluation, no quality metric
        found = {i for i in found if RULES[i].role != "eval_metric"}
    return frozenset(found)


@functools.lru_cache(maxsize=64)
def _automatic(names: tuple[str, ...]) -> Casting:
    by_rule: dict[int, list[str]] = {}
    for name in names:
        for index in _rules_matching(name):
            by_rule.setdefault(index, []).append(name)
    metrics: dict[str, tuple[str, ...]] = {}
    why: dict[str, str] = {}
    taken: set[str] = set()
    for role in ROLES:
        found: dict[str, None] = {}
        sources: list[str] = []
        for index, rule in enumerate(RULES):
            if rule.role != role or index not in by_rule:
                continue
            hits = [n for n in by_rule[index] if n not in taken and n not in found]
            if len(hits) > MAX_PLAYERS and role not in GATHERED:
                continue  # a family (a norm per layer), not the run's grad norm: the families view shows it
            if hits:
                found.update(dict.fromkeys(hits))
                sources.append(rule.source)
                if role not in GATHERED:
                    break
        if found:
            metrics[role] = tuple(n for n in names if n in found)[:MAX_PLAYERS]  # the columns' order
            why[role] = "; ".join(dict.fromkeys(sources))
            taken.update(found)
    return Casting(metrics, why)


def automatic(columns: Sequence[str]) -> Casting:
    """The roles the names of ``columns`` play, by :data:`RULES` (columns' order kept within a role)."""
    names = tuple(dict.fromkeys(str(c) for c in columns if c not in ("step", "t", "rank", "seg", "epoch", "samples")))
    return _automatic(names)


def cast(
    columns: Sequence[str],
    chosen: Mapping[str, Sequence[str]] | None = None,
    chosen_where: str | Mapping[str, str] = "set by hand",
) -> Casting:
    """The run's roles: :func:`automatic`, with each role in ``chosen`` replaced by the metrics named there.

    ``chosen_where`` says where the choice was made (``"set in the URL"``, ``"set in Settings"``; one per
    role as a mapping). A role
    chosen with names the run lacks keeps its automatic metrics and the casting lists the names as unknown;
    an empty choice means "no metric plays it". Unknown roles in ``chosen`` are ignored.
    """
    auto = automatic(columns)
    if not chosen:
        return auto
    present = {str(c) for c in columns}
    metrics, why = dict(auto.metrics), dict(auto.why)
    unknown: dict[str, tuple[str, ...]] = {}
    for role, wanted in chosen.items():
        if role not in ROLE_LABELS:
            continue
        wanted = tuple(dict.fromkeys(str(n) for n in wanted))
        have = tuple(n for n in wanted if n in present)
        if wanted and not have:
            unknown[role] = wanted
            continue
        for other in list(metrics):  # a metric chosen for this role leaves the role it had
            if other != role and set(metrics[other]) & set(have):
                metrics[other] = tuple(n for n in metrics[other] if n not in have)
                if not metrics[other]:
                    del metrics[other], why[other]
        if have:
            where = chosen_where if isinstance(chosen_where, str) else chosen_where.get(role, "set by hand")
            metrics[role], why[role] = have, where
        else:
            metrics.pop(role, None)
            why.pop(role, None)
    return Casting(metrics, why, unknown)


def role_of(name: str) -> str | None:
    """The role a name plays by itself (``"train/learning_rate"`` -> ``"lr"``), None for none."""
    return automatic([name]).role_of(name)


def is_evaluation(name: str) -> bool:
    """Whether ``name`` is a result of an evaluation (``eval_loss``, ``eval/accuracy``, ``val_acc``,
    ``test100rew``): a row that logs one was written when an evaluation ended."""
    return bool(_EVAL_PREFIX.match(str(name)))


def is_evaluation_seconds(name: str) -> bool:
    """Whether ``name`` is how long an evaluation took, in seconds (HF's ``eval_runtime``, ``eval/runtime``)."""
    return bool(_EVAL_SECONDS.match(str(name)))


def parse_choices(pairs: Iterable[tuple[str, Sequence[str]]]) -> dict[str, tuple[str, ...]]:
    """Choices from ``("role.loss", ["train/total"])`` pairs (URL parameters): only known roles, names as given."""
    out: dict[str, tuple[str, ...]] = {}
    for key, values in pairs:
        if not key.startswith("role."):
            continue
        role = key[len("role.") :]
        if role in ROLE_LABELS:
            out[role] = tuple(str(v) for v in values if str(v) != "")
    return out
