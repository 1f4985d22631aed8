"""The pytest plugin, driven the way a user's suite drives it: generated modules in pytester."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from nsqbox.testing import ThreadBox
from nsqbox.testing.options import OPTIONS

from .conftest import run_generated
from .test_docs import examples

pytest_plugins = ["pytester"]


def test_importing_the_plugin_is_light() -> None:
    probe = textwrap.dedent(
        """
        import json, sys
        import pytest
        import nsqbox.testing.plugin
        heavy = ["trio", "httpx", "textual", "pyspark", "nsqbox.nsqd", "nsqbox.testing.config"]
        print(json.dumps(sorted(m for m in heavy if m in sys.modules)))
        """
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_help_lists_every_option(pytester: pytest.Pytester) -> None:
    result = run_generated(pytester, "--help")
    text = result.stdout.str()
    for opt in OPTIONS:
        assert opt.flag in text
        assert opt.ini in text


def test_report_header(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_nothing(): pass")
    result = run_generated(pytester, "--nsqbox-nsqd-count=2")
    result.stdout.fnmatch_lines(["nsqbox: thread, 2 nsqd, 1 nsqlookupd"])
    result.assert_outcomes(passed=1)


ISOLATION = """
import pytest

@pytest.mark.parametrize("body", [b"first", b"second", b"third"])
def test_same_topic(nsqbox, body):
    assert nsqbox.stats().topics == {}
    nsqbox.publish("orders", body)
    assert nsqbox.wait_for("orders", depth=1).message_count == 1
    assert nsqbox.consume("orders", "billing") == [body]
"""


def test_tests_using_the_same_topic_do_not_see_each_other(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_isolation=ISOLATION)
    run_generated(pytester).assert_outcomes(passed=3)


def test_cleanup_none_keeps_what_a_test_left(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_one(nsqbox):
            nsqbox.publish("orders", b"left behind")

        def test_two(nsqbox):
            assert nsqbox.stats().topic("orders").depth == 1
        """
    )
    run_generated(pytester, "--nsqbox-cleanup=none").assert_outcomes(passed=2)
    run_generated(pytester).assert_outcomes(passed=1, failed=1)


FAILING = """
def test_depth(nsqbox):
    nsqbox.publish("orders", b"one")
    nsqbox.wait_for("orders", depth=3, timeout=0.2)

def test_channel(nsqbox):
    nsqbox.wait_for("orders", "billing", clients=1, timeout=0.2)

def test_consume(nsqbox):
    nsqbox.publish("orders", b"only")
    nsqbox.consume("orders", "billing", 2, timeout=0.2)

def test_capture(nsqbox):
    with nsqbox.capture("orders") as published:
        published.wait_for(1, timeout=0.2)
"""


def test_failing_expectations_say_what_was_seen(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_failing=FAILING)
    result = run_generated(pytester)
    result.assert_outcomes(failed=4)
    errors = [line[1:].strip() for line in result.stdout.lines if line.startswith("E   ")]
    prefix = "nsqbox.testing.WaitTimeout: nsqbox: timed out after 0.2s "
    assert errors == [
        prefix + "waiting for topic 'orders' to have depth=3; "
        "last seen: depth=1, message_count=1, channels=[]",
        prefix + "waiting for channel 'billing' of topic 'orders' to have clients=1; "
        "last seen: no topic 'orders' (topics: [])",
        prefix + "consuming 2 message(s) from channel 'billing' of topic 'orders'; "
        "got 1: [b'only']",
        prefix + "waiting for 1 message(s) published to topic 'orders'; captured 0: []",
    ]
    # each failure points at the test's own line, not into the plugin
    where = [line for line in result.stdout.lines if line.endswith(": WaitTimeout")]
    assert len(where) == 4
    assert all(line.startswith("test_failing.py:") for line in where)
    assert "nsqbox/testing/" not in result.stdout.str()


OPTIONS_MODULE = """
import pytest
from nsqbox.testing.remote import http_json

def test_options(nsqbox, nsqbox_config):
    limit = http_json(nsqbox.nsqd_http_address, "/config/max_msg_size")
    assert limit == {limit}
    with pytest.raises(ValueError, match="message too big"):
        nsqbox.publish("t", b"x" * ({limit} + 1))
    assert nsqbox_config.timeout == 3
"""


def test_options_come_from_ini_then_flags(pytester: pytest.Pytester) -> None:
    ini = "nsqbox_nsqd_args = --max-msg-size=100\nnsqbox_timeout = 3"
    pytester.makepyfile(test_options=OPTIONS_MODULE.format(limit=100))
    run_generated(pytester, ini=ini).assert_outcomes(passed=1)
    pytester.makepyfile(test_options=OPTIONS_MODULE.format(limit=50))
    run_generated(pytester, "--nsqbox-nsqd-args=--max-msg-size=50", ini=ini).assert_outcomes(
        passed=1
    )


DATA = """
def test_where(nsqbox_proc):
    with open({path!r}, "w") as f:
        f.write(nsqbox_proc.data_root)
"""


@pytest.mark.parametrize("setting", ["auto", "tmp", "path"])
def test_data_path(pytester: pytest.Pytester, tmp_path: Path, setting: str) -> None:
    record = tmp_path / "data_root"
    pytester.makepyfile(test_data=DATA.format(path=str(record)))
    mine = tmp_path / "mine"
    value = str(mine) if setting == "path" else setting
    run_generated(pytester, f"--nsqbox-data-path={value}").assert_outcomes(passed=1)
    data_root = record.read_text()
    shm = Path("/dev/shm")
    if setting == "path" or (setting == "auto" and shm.is_dir()):
        parent = mine if setting == "path" else shm
        assert Path(data_root).parent == parent
        assert not Path(data_root).exists()  # removed after the session
    else:
        assert Path(data_root).is_relative_to(pytester.path.parent.parent)  # pytest's basetemp
        assert Path(data_root, "nsqd0", "nsqd.dat").exists()  # kept for post-mortems


def test_a_bad_option_stops_the_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_nothing(): pass")
    result = run_generated(pytester, ini="nsqbox_nsqd_count = two")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: nsqbox: nsqbox_nsqd_count/--nsqbox-nsqd-count: invalid literal*"]
    )


def test_bad_daemon_flags_fail_the_fixture(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_it(nsqbox): pass")
    result = run_generated(pytester, "--nsqbox-nsqd-args=--no-such-flag")
    result.assert_outcomes(errors=1)
    assert (
        "nsqbox: bad nsqd flags ['--no-such-flag']: flag provided but not defined: -no-such-flag"
        in result.stdout.lines
    )


def test_trio_fixtures(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import trio

        async def test_box_in_the_tests_nursery(nsqbox_trio, nursery):
            assert [n.options.node_id for n in nsqbox_trio.nsqds] == [1]
            with nsqbox_trio.capture("t") as published:
                await nsqbox_trio.publish("t", [b"a", b"b"])
                assert await published.await_for(2) == [b"a", b"b"]
            assert await nsqbox_trio.consume("t", "c", 2) == [b"a", b"b"]
            await nsqbox_trio.wait_for("t", "c", depth=0, in_flight=0)
            stats = await nsqbox_trio.wait_until(lambda s: s.channel("t", "c") is not None)
            assert stats.topic("t").message_count == 2

        async def test_factory(nsqbox_trio_factory):
            cluster = await nsqbox_trio_factory(nsqd=2, lookupd=0, msg_timeout=2.0)
            assert [n.options.msg_timeout for n in cluster.nsqds] == [2.0, 2.0]
            assert cluster.lookupd_http_address is None
            await cluster.publish("t", b"x", node=1)
            assert cluster.stats(node=0).topics == {}
            assert cluster.stats(node=1).topic("t").depth == 1

        async def test_timeout(nsqbox_trio):
            import pytest
            from nsqbox.testing import WaitTimeout
            with pytest.raises(WaitTimeout, match="waiting for topic 't' to exist"):
                await nsqbox_trio.wait_for("t", timeout=0.05)
        """
    )
    run_generated(pytester).assert_outcomes(passed=3)


def test_subprocess_mode(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_isolation=ISOLATION)
    pytester.makepyfile(
        test_subprocess="""
        from nsqbox.testing import Mode

        def test_capture_taps_as_in_thread_mode(nsqbox):
            assert nsqbox.mode is Mode.SUBPROCESS
            with nsqbox.capture("orders") as published:
                nsqbox.publish("orders", [b"a", b"b"])
                nsqbox.publish("orders", b"later", defer_ms=60_000)
            assert published.mode == "tap"
            assert published.bodies == [b"a", b"b", b"later"]
            assert [m.defer_ms for m in published.messages] == [0, 0, 60_000]
            # nothing was created or taken: the first channel gets every message
            assert list(nsqbox.stats().topic("orders").channels) == []
            assert nsqbox.consume("orders", "app", 2) == [b"a", b"b"]

        def test_capture_through_a_channel_on_request(nsqbox):
            nsqbox.consume("orders", "app", 0)
            with nsqbox.capture("orders", mode="channel") as published:
                nsqbox.publish("orders", [b"a", b"b"])
            assert published.mode == "channel"
            assert published.bodies == [b"a", b"b"]
        """
    )
    result = run_generated(pytester, "--nsqbox-mode=subprocess", "--nsqbox-start-timeout=30")
    result.assert_outcomes(passed=5)


NOPROC = """
from nsqbox.testing import Mode

def test_uses_the_running_servers(nsqbox, nsqbox_config):
    assert nsqbox.mode is Mode.NOPROC
    assert nsqbox.nsqd_tcp_address == "{tcp}"
    topic = nsqbox.name("orders")
    with nsqbox.capture(topic) as published:
        nsqbox.publish(topic, b"x")
    assert published.bodies == [b"x"]
"""


def test_noproc_mode(pytester: pytest.Pytester, thread_box: ThreadBox) -> None:
    a = thread_box.addresses
    pytester.makepyfile(test_noproc=NOPROC.format(tcp=a.nsqd_tcp[0]))
    result = run_generated(
        pytester,
        "--nsqbox-mode=noproc",
        f"--nsqbox-nsqd-tcp-address={a.nsqd_tcp[0]}",
        f"--nsqbox-nsqd-http-address={a.nsqd_http[0]}",
        f"--nsqbox-lookupd-tcp-address={a.lookupd_tcp[0]}",
        f"--nsqbox-lookupd-http-address={a.lookupd_http[0]}",
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"nsqbox: noproc, nsqd {a.nsqd_tcp[0]}"])
    assert thread_box.stats().topics == {}  # the test's topic is gone


def test_noproc_factory(pytester: pytest.Pytester, thread_box: ThreadBox) -> None:
    a = thread_box.addresses
    pytester.makeconftest(
        f"""
        from nsqbox.testing import factories

        running = factories.nsqbox_noproc(
            nsqd_tcp_address="{a.nsqd_tcp[0]}",
            nsqd_http_address=["{a.nsqd_http[0]}"],
            lookupd_http_address="{a.lookupd_http[0]}",
        )
        on_running = factories.nsqbox("running", cleanup="delete", timeout=2)
        """
    )
    pytester.makepyfile(
        """
        def test_it(on_running):
            assert on_running.mode.value == "noproc"
            assert on_running.timeout == 2
            on_running.publish("from-the-factory", b"x")
            assert on_running.wait_for("from-the-factory", depth=1).message_count == 1
        """
    )
    run_generated(pytester).assert_outcomes(passed=1)
    assert thread_box.stats().topics == {}


def test_noproc_mode_without_servers(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_it(nsqbox): pass")
    result = run_generated(
        pytester,
        "--nsqbox-mode=noproc",
        "--nsqbox-nsqd-tcp-address=127.0.0.1:1",
        "--nsqbox-nsqd-http-address=127.0.0.1:1",
        "--nsqbox-lookupd-http-address=",
    )
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*nsqbox noproc: the servers do not answer (GET http://127.0.0.1:1/ping: *"]
    )


WHERE = """
import json, os
import pytest

@pytest.mark.parametrize("i", range(4))
def test_where(nsqbox, i, tmp_path_factory):
    nsqbox.publish("orders", b"x")
    nsqbox.wait_for("orders", depth=1)
    record = {{"worker": os.environ["PYTEST_XDIST_WORKER"], "nsqd": nsqbox.nsqd_tcp_address}}
    with open({path!r}, "a") as f:
        f.write(json.dumps(record) + "\\n")
"""


def test_xdist(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """Every client style (the docs' modules) and isolation under ``-n 2``; one box per worker.

    ``--dist=each`` runs every test on both workers, so both surely start a box.
    """
    for module in ("xdist", "nsq", "gnsq", "ansq"):  # the test extra installs them
        pytest.importorskip(module)
    blocks = examples(Path(__file__).resolve().parents[2] / "docs/testing.md")
    for name, body in blocks.items():
        pytester.path.joinpath(name).write_text(body)
    documented = sum(len(re.findall(r"^(?:async )?def test_", b, re.M)) for b in blocks.values())
    pytester.makepyfile(test_isolation=ISOLATION)
    where = tmp_path / "where.jsonl"
    pytester.makepyfile(test_where=WHERE.format(path=str(where)))
    result = run_generated(pytester, "-n", "2", "--dist=each")
    result.assert_outcomes(passed=2 * (documented + 3 + 4))
    addresses: dict[str, set[str]] = {}
    for line in where.read_text().splitlines():
        record = json.loads(line)
        addresses.setdefault(record["worker"], set()).add(record["nsqd"])
    assert sorted(addresses) == ["gw0", "gw1"]
    assert all(len(a) == 1 for a in addresses.values())  # one box per worker session
    assert addresses["gw0"] != addresses["gw1"]


def _noproc_args(box: ThreadBox) -> tuple[str, ...]:
    a = box.addresses
    return (
        "--nsqbox-mode=noproc",
        f"--nsqbox-nsqd-tcp-address={a.nsqd_tcp[0]}",
        f"--nsqbox-nsqd-http-address={a.nsqd_http[0]}",
        f"--nsqbox-lookupd-tcp-address={a.lookupd_tcp[0]}",
        f"--nsqbox-lookupd-http-address={a.lookupd_http[0]}",
    )


def test_nsqbox_session_follows_noproc_mode(
    pytester: pytest.Pytester, thread_box: ThreadBox, docs_path: Path
) -> None:
    """The docs' module-fixture example, in noproc mode: the app and the handle share servers."""
    pytester.makepyfile(test_session_app=examples(docs_path)["test_session_app.py"])
    pytester.makepyfile(
        test_same_box=f"""
        from nsqbox.testing import Mode

        def test_the_handle_uses_the_session_box(nsqbox, nsqbox_session):
            assert nsqbox.box is nsqbox_session
            assert nsqbox.mode is Mode.NOPROC
            assert nsqbox_session.nsqd_tcp_address == "{thread_box.addresses.nsqd_tcp[0]}"
        """
    )
    run_generated(pytester, *_noproc_args(thread_box)).assert_outcomes(passed=2)
    assert thread_box.stats().topics == {}  # the app published there, and cleanup saw it


def test_nsqbox_proc_warns_in_noproc_mode(pytester: pytest.Pytester, thread_box: ThreadBox) -> None:
    pytester.makepyfile("def test_it(nsqbox_proc): pass")
    result = run_generated(pytester, *_noproc_args(thread_box))
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*NSQBoxWarning: nsqbox_proc starts servers of its own*"])
