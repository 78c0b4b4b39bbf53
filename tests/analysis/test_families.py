"""Families: grouping by prefix (or shared suffix) and the model's own layer order."""

from __future__ import annotations

from monitor_cb.analysis.families import Family, family_named, find_families, natural_key


def test_layers_in_natural_order():
    names = [f"local_norm/model.layers.{i}.attention.wq.weight" for i in (10, 2, 1, 0)]
    (family,) = find_families(["loss", "grad_norm", *names])
    assert family.name == "local_norm"
    assert family.members == tuple(f"model.layers.{i}.attention.wq.weight" for i in (0, 1, 2, 10))
    assert family.columns[-1] == "local_norm/model.layers.10.attention.wq.weight"


def test_several_families_and_a_lone_prefix():
    cols = [
        "local_norm/model.layers.0.w",
        "local_norm/model.layers.1.w",
        "adam_m_norm/model.layers.0.w",
        "adam_m_norm/model.layers.1.w",
        "adam_m_norm/model.layers.2.w",
        "weight_norm",
        "eval/loss",  # one member: no family
    ]
    families = find_families(cols)
    assert [f.name for f in families] == ["adam_m_norm", "local_norm"]
    assert all("eval/loss" not in f.columns for f in families)


def test_per_parameter_histograms_group_by_suffix():
    cols = ["model.layers.1.w/auto", "model.layers.0.w/auto", "loss"]
    (family,) = find_families(cols)
    assert family.name == "*/auto"
    assert family.members == ("model.layers.0.w", "model.layers.1.w")
    assert family.column_of("model.layers.1.w") == "model.layers.1.w/auto"


def test_family_named_and_unknown_member():
    cols = ["grad_norm/a.1", "grad_norm/a.2"]
    family = family_named(cols, "grad_norm")
    assert isinstance(family, Family) and len(family) == 2
    assert family_named(cols, "local_norm") is None
    try:
        family.column_of("a.3")
    except KeyError as exc:
        assert "a.3" in str(exc)
    else:
        raise AssertionError("an unknown member must raise")


def test_natural_key():
    assert sorted(["layers.10", "layers.2", "layers.1a"], key=natural_key) == ["layers.1a", "layers.2", "layers.10"]
