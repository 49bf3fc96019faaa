"""The converter interface: every registered converter is a sub-command, and a new one needs only its
module and one registry line (docs/convert.md, "Add a converter")."""

from __future__ import annotations

import sys
import types

from offlinerl.convert import registry
from offlinerl.convert.interface import Converter
from tests.convert.helpers import run_cli


def test_registered_converters_have_unique_names():
    names = [c.name for c in registry.converters()]
    assert names == ["samplebatch", "rllib-parquet", "minari", "table"]


def test_a_new_module_plus_one_registry_line_is_a_sub_command(monkeypatch, tmp_path):
    seen = {}

    def add_arguments(p):
        p.add_argument("inputs", nargs="+")

    def run(args):
        seen.update(inputs=args.inputs, output=args.output, overwrite=args.overwrite)
        return 1

    module = types.ModuleType("fake_format")
    module.CONVERTER = Converter(name="fake", help="a test format", add_arguments=add_arguments, run=run)
    monkeypatch.setitem(sys.modules, "fake_format", module)
    monkeypatch.setattr(registry, "CONVERTERS", (*registry.CONVERTERS, "fake_format"))
    assert run_cli(["convert", "fake", "a", "b", "-o", str(tmp_path / "out")]) == 1
    assert seen == {"inputs": ["a", "b"], "output": str(tmp_path / "out"), "overwrite": False}
