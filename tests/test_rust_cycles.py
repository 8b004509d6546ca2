"""scripts/check-rust-cycles: the module graph it reads from a crate and what it reports."""
import importlib.machinery
import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "check-rust-cycles"
OK = "check-rust-cycles: no module cycles in src\n"


def load_script():
    loader = importlib.machinery.SourceFileLoader("check_rust_cycles", str(SCRIPT))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(module)
    return module


def crate(tmp_path, files: dict) -> str:
    for name, text in files.items():
        (tmp_path / "src" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "src" / name).write_text(text)
    return "src"


def run(tmp_path, files, capsys):
    script = load_script()
    script.ROOT = tmp_path
    code = script.main([crate(tmp_path, files)])
    return code, capsys.readouterr().out


def test_a_cycle_through_use_and_a_full_path_is_reported_with_its_lines(tmp_path, capsys):
    code, out = run(tmp_path, {
        "lib.rs": "pub mod a;\npub mod b;\npub mod c;\npub use a::A;\n",
        "a.rs": "use crate::{b::{self, B}, c};\npub struct A;\n",
        "b.rs": "pub struct B;\npub fn f() { super::a::g(); }\n",
        "c.rs": "",
    }, capsys)
    assert code == 1
    assert "modules in an import cycle: a, b" in out
    assert "a -> b  (src/a.rs:1)" in out and "b -> a  (src/b.rs:2)" in out
    assert "-> c" not in out  # c is not on the cycle


def test_nested_and_inline_modules_resolve_and_a_facade_is_no_cycle(tmp_path, capsys):
    code, out = run(tmp_path, {
        # lib.rs and instructions/mod.rs re-export their children; join uses the root's ID back
        "lib.rs": "pub mod instructions;\npub mod state;\npub use instructions::*;\n"
                  "pub const ID: u8 = 0;\n"
                  "pub mod program {\n    use super::*;\n"
                  "    fn f() { instructions::join::handler() }\n}\n",
        "instructions/mod.rs": "pub mod join;\npub use join::*;\n",
        "instructions/join.rs": "use crate::{state::Run, ID};\npub fn handler() {}\n"
                                "#[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
        "state.rs": "pub struct Run;\n",
    }, capsys)
    assert (code, out) == (0, OK)


def test_paths_in_comments_strings_and_chars_are_not_dependencies(tmp_path, capsys):
    code, out = run(tmp_path, {
        "lib.rs": "mod a;\nmod b;\n",
        "a.rs": "use crate::b::B;\n",
        "b.rs": "// crate::a::x\n/* nested /* crate::a::y */ crate::a::z */\n"
                "const S: &str = \"crate::a::s\";\nconst R: &str = r#\"crate::a::\"r\"#;\n"
                "const C: char = '\"';\nfn f<'a>(x: &'a str) -> &'a str { x }\npub struct B;\n",
    }, capsys)
    assert (code, out) == (0, OK)

