import json

import pytest

from monitor_cb.diagnosis.settings import (
    DiagnosisSettings,
    load_settings,
    load_settings_checked,
    save_settings,
    settings_path,
)


def test_dict_round_trip():
    s = DiagnosisSettings(grad_ratio=30.0, disabled=("plateau",))
    assert DiagnosisSettings.from_dict(json.loads(json.dumps(s.to_dict()))) == s


def test_bad_values_are_refused_with_the_name():
    with pytest.raises(ValueError, match="grad_ratio"):
        DiagnosisSettings(grad_ratio=-1)
    with pytest.raises(ValueError, match="baseline_window"):
        DiagnosisSettings(baseline_window=10.5)
    with pytest.raises(ValueError, match="disabled"):
        DiagnosisSettings(disabled="plateau")
    with pytest.raises(ValueError, match="unknown setting"):
        DiagnosisSettings.from_dict({"nope": 1})


def test_save_then_load(tmp_path):
    s = DiagnosisSettings(spike_z=10.0)
    path = save_settings(tmp_path, s)
    assert path == tmp_path / ".monitor" / "diagnosis.json"
    assert load_settings(tmp_path) == s
    assert [p.name for p in path.parent.iterdir()] == ["diagnosis.json"]  # no temp file left


def test_missing_file_gives_defaults_quietly(tmp_path, recwarn):
    assert load_settings(tmp_path) == DiagnosisSettings()
    assert len(recwarn) == 0


def test_corrupt_file_gives_defaults_and_one_warning(tmp_path):
    path = settings_path(tmp_path)
    path.parent.mkdir()
    path.write_text("{not json")
    with pytest.warns(UserWarning, match="not valid JSON"):
        assert load_settings(tmp_path) == DiagnosisSettings()


@pytest.mark.parametrize("content", ["[1, 2]", "null", "\xff\xfe"])
def test_wrong_shape_gives_defaults(tmp_path, content):
    path = settings_path(tmp_path)
    path.parent.mkdir()
    path.write_bytes(content.encode("latin-1"))
    settings, problems = load_settings_checked(tmp_path)
    assert settings == DiagnosisSettings()
    assert len(problems) == 1


def test_unknown_keys_and_bad_values_are_skipped_with_warnings(tmp_path):
    path = settings_path(tmp_path)
    path.parent.mkdir()
    path.write_text(json.dumps({"spike_z": 12, "future_knob": 1, "grad_ratio": "high"}))
    settings, problems = load_settings_checked(tmp_path)
    assert settings.spike_z == 12
    assert settings.grad_ratio == DiagnosisSettings().grad_ratio
    assert any("future_knob" in p for p in problems)
    assert any("grad_ratio" in p for p in problems)
    with pytest.warns(UserWarning):
        load_settings(tmp_path)


def test_every_knob_has_a_help_line_and_a_label_in_words():
    from dataclasses import fields

    from monitor_cb.diagnosis.settings import HELP, LABELS

    names = {f.name for f in fields(DiagnosisSettings)}
    assert set(HELP) == names == set(LABELS)
    assert all("_" not in label and label[0].isupper() for label in LABELS.values())  # words, not field names
    assert all(len(text) > 20 for text in HELP.values())


def test_retired_knobs_in_an_old_file_are_ignored_quietly(tmp_path):
    path = settings_path(tmp_path)
    path.parent.mkdir()
    path.write_text(json.dumps({"drop_min_seconds": 3.0, "straggler_ratio": 1.3, "spike_z": 9}))
    settings, problems = load_settings_checked(tmp_path)
    assert settings.spike_z == 9 and problems == []


def test_roles_set_by_hand_round_trip_and_bad_ones_are_refused_with_a_reason(tmp_path) -> None:
    from monitor_cb.diagnosis.settings import load_settings_checked, save_settings, settings_from_dict_lenient

    chosen = DiagnosisSettings(roles={"loss": ["train/total", "Train/Total"], "lr": "lr-AdamW"})
    assert chosen.chosen_roles() == {"loss": ("train/total", "Train/Total"), "lr": ("lr-AdamW",)}
    save_settings(tmp_path, chosen)
    assert load_settings_checked(tmp_path) == (chosen, [])
    for bad, reason in (
        ({"losss": ["x"]}, "unknown role"),
        ({"loss": [1]}, "must be text"),
        ({"loss": ["x" * 10_001]}, "must be text"),
        ({"loss": {"a": 1}}, "list of at most"),
        ("loss", "must map a role"),
    ):
        settings, problems = settings_from_dict_lenient({"roles": bad})
        assert settings.roles == () and len(problems) == 1 and reason in problems[0], (bad, problems)
