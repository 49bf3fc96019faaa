"""What a card records about the software that made its dataset, read back from cards of any shape."""

from __future__ import annotations

import importlib.metadata

from offlinerl.episodes.software import made_with, made_with_text, simulator_mismatch, simulator_note


def test_made_with_names_this_machines_packages_and_cpu():
    record = made_with()
    assert record["packages"]["mujoco"] == importlib.metadata.version("mujoco")
    assert record["packages"]["torch"] == importlib.metadata.version("torch")
    assert record["cpu"]["machine"] and record["cpu"]["torch_capability"]
    text = made_with_text(record)
    assert text.startswith(f"MuJoCo {record['packages']['mujoco']}, gymnasium ") and text.endswith(
        f"on {record['cpu']['machine']} ({record['cpu']['torch_capability']})")
    assert simulator_mismatch({"made_with": record}) == [] and simulator_note("d", {"made_with": record}) is None


def test_another_simulator_is_named_with_this_machines_version():
    record = made_with()
    record["packages"].update({"mujoco": "4.0.1", "gymnasium": "0.29.1", "torch": "1.0"})  # torch: not a simulator
    here = {name: importlib.metadata.version(name) for name in ("mujoco", "gymnasium")}
    assert simulator_mismatch({"made_with": record}) == [f"mujoco 4.0.1 (this machine: {here['mujoco']})",
                                                         f"gymnasium 0.29.1 (this machine: {here['gymnasium']})"]
    assert simulator_note("hc", {"made_with": record}).startswith("note: hc was made with mujoco 4.0.1 (this machine: ")


def test_a_card_s_made_with_of_any_shape_is_read_without_a_traceback():
    """``made_with`` comes from a file the user may have been handed: odd shapes say less, never raise."""
    for odd in (None, [], "x", {"packages": []}, {"packages": None}, {"packages": {"mujoco": ["4"]}, "cpu": []},
                {"packages": {}, "cpu": "AVX"}):
        made_with_text(odd)
        simulator_mismatch({"made_with": odd})
        simulator_note("d", {"made_with": odd} if odd is not None else None)
    assert made_with_text(None) is None and made_with_text({"packages": []}) is None
    assert made_with_text({"packages": {"mujoco": "4.0.1", "torch": None}, "cpu": []}) == "MuJoCo 4.0.1"
    assert simulator_mismatch({"made_with": {"packages": {"mujoco": 4}}})[0].startswith("mujoco 4 (this machine: ")
