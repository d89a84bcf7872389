"""The stand-in for a module the daemon's dependencies import but it never uses: ``import``
returns it without loading anything, and the first name read from it loads the real module,
which the stand-in then carries (mokkafs.host.imports). Each case runs in a fresh interpreter,
since pytest's own may have ``ssl`` loaded."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.helpers.mounts import REPO


def run(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_import_loads_nothing_until_a_name_is_read() -> None:
    out = run("""
        import sys
        from mokkafs.host.imports import defer, loaded
        defer("ssl")
        import ssl
        import trio
        before = (loaded("ssl"), "_ssl" in sys.modules)
        context = ssl.SSLContext  # the first name read loads it
        print(before, loaded("ssl"), sys.modules["ssl"] is not ssl, context.__module__,
              ssl.MemoryBIO is sys.modules["ssl"].MemoryBIO)
        from ssl import SSLError
        print(SSLError.__module__)
    """)
    assert out.splitlines() == ["(False, False) True True ssl True", "ssl"]


def test_a_module_already_loaded_or_missing_is_left_alone() -> None:
    out = run("""
        import sys, ssl
        from mokkafs.host.imports import defer, loaded
        defer("ssl")
        defer("no_such_module_here")
        print(sys.modules["ssl"] is ssl, loaded("ssl"), "no_such_module_here" in sys.modules)
    """)
    assert out == "True True False"


def test_loading_one_deferred_module_may_load_another(tmp_path: Path) -> None:
    (tmp_path / "outer.py").write_text("import inner\nVALUE = inner.VALUE + 1\n")
    (tmp_path / "inner.py").write_text("VALUE = 41\n")
    out = run(f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        from mokkafs.host.imports import defer, loaded
        defer("inner")
        defer("outer")
        import outer
        print(outer.VALUE, loaded("inner"), loaded("outer"))
    """)
    assert out == "42 True True"


def test_hashes_without_openssl_are_the_same() -> None:
    out = run("""
        import sys
        from mokkafs.host.imports import absent, loaded
        absent("_hashlib")
        import hashlib, hmac, secrets
        print(hashlib.sha256(b"mokkafs").hexdigest()[:16],
              hashlib.blake2b(b"mokkafs", digest_size=8).hexdigest(),
              hmac.compare_digest(b"a", b"a"), loaded("_hashlib"))
    """)
    import hashlib

    assert out == " ".join([hashlib.sha256(b"mokkafs").hexdigest()[:16],
                            hashlib.blake2b(b"mokkafs", digest_size=8).hexdigest(),
                            "True", "False"])
