"""``nsqbox fault``: faults on demand from the command line, through the admin service.

::

    nsqbox fault list
    nsqbox fault add fail_publishes --topic orders --count 3
    nsqbox fault add disk_full --node 127.0.0.1:4151 --duration 30s
    nsqbox fault add time_out_in_flight --topic orders --channel billing
    nsqbox fault add latency --param delay=0.2     # any kind a node has, any parameter
    nsqbox fault lift 1 [--node 127.0.0.1:4151]
    nsqbox fault lift --all
    nsqbox fault restart --node 0                  # also crash, start (nsqbox up only)
    nsqbox fault restart                           # the only nsqd

Every command talks to the admin service's ``/api/faults`` (``--admin-http-address``, default
``127.0.0.1:4171``, where ``nsqbox up`` serves it), which finds the nodes and forwards. A fault
(or a restart, crash or start) without ``--node`` goes to the only nsqd. Refusals print the
admin service's message and exit with status 1, as does ``lift`` of a fault that is not in
force; ``--json`` prints the answers as JSON.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, TextIO

from ..broker.faults import left_text
from ..go.flags import FlagSet
from ..process.terminal_text import visible
from .common import Fatal, ParsedArgs, run_tool, run_trio

if TYPE_CHECKING:
    from ..admin.faults import FaultListing, FaultSource

__all__ = ["DEFAULT_ADMIN_HTTP", "FaultCommand", "fault_flag_set", "format_listing", "main"]

#: Where ``nsqbox up`` serves the admin API.
DEFAULT_ADMIN_HTTP = "127.0.0.1:4171"

ACTIONS = ("list", "add", "lift", "restart", "crash", "start")
USAGE = """\
usage: nsqbox fault COMMAND [ARG] [flags]
  list                   the faults in force on every node, and the box's nodes
  add KIND               start fault KIND (--node, --topic, --channel, --count, --duration,
                         --error, --user-agent, --reset, --param key=value)
  lift ID [--node N]     end one fault
  lift --all             end every fault on every node
  restart|crash|start    node control, under nsqbox up only (--node N; default: the only nsqd)
KIND, on nsqbox's nsqd: fail_publishes, disk_full, time_out_in_flight, drop_connections,
  latency and stall (--param delay=200ms); on its nsqlookupd: hide_producers, lookupd_down
  (docs/faults.md, or nsqbox docs faults)
"""
#: Fault parameters with a flag of their own (sent when given), besides ``--param``.
_STRING_PARAMS = ("topic", "channel", "error", "user-agent")
#: The columns of ``nsqbox fault list``: the fault's own fields, in this order.
_SCOPE_KEYS = ("topic", "channel", "client", "user_agent")


def fault_flag_set() -> FlagSet:
    """``nsqbox fault``'s flags."""
    flags = FlagSet("nsqbox fault")
    flags.add_string("admin-http-address", DEFAULT_ADMIN_HTTP, "the admin service's HTTP address")
    flags.add_string("node", "", "the node: its HTTP address (or, for node control, its index)")
    flags.add_string("topic", "", "the fault's topic")
    flags.add_string("channel", "", "the fault's channel")
    flags.add_int("count", 0, "how many commands the fault lasts (default: until lifted)")
    flags.add_duration("duration", 0.0, "how long the fault lasts (default: until lifted)")
    flags.add_string("error", "", "the error the fault reports")
    flags.add_string("user-agent", "", "drop_connections: clients whose user agent contains it")
    flags.add_bool("reset", False, "drop_connections: reset (RST) instead of a clean close")
    flags.add_string_array("param", "another fault parameter, key=value (repeatable)")
    flags.add_bool("all", False, "lift: every fault on every node")
    flags.add_string("user", "", "the admin user to send (for an admin service with --admin-user)")
    flags.add_string("acl-http-header", "X-Forwarded-User", "the header naming the admin user")
    flags.add_bool("json", False, "print the admin service's answers as JSON")
    flags.add_duration("http-client-connect-timeout", 2.0, "timeout for HTTP connect")
    flags.add_duration("http-client-request-timeout", 30.0, "timeout for HTTP request")
    flags.add_bool("version", False, "print version")
    return flags


@dataclass(frozen=True, slots=True)
class FaultCommand:
    """One ``nsqbox fault`` command line, parsed."""

    action: str
    admin: str
    kind: str = ""
    fault_id: str = ""
    node: str = ""
    params: list[tuple[str, str]] = field(default_factory=list)
    all: bool = False
    json: bool = False
    headers: dict[str, str] = field(default_factory=dict)
    connect_timeout: float = 2.0
    request_timeout: float = 30.0


def _seconds(value: float) -> str:
    return repr(float(value))


def parse_command(flags: FlagSet, args: ParsedArgs) -> FaultCommand:
    """The command ``args`` (parsed by ``flags``) asks for; Fatal when it makes no sense."""

    def value(name: str) -> Any:
        return flags[name].value.value

    positional = list(args.positional)
    if not positional or positional[0] not in ACTIONS:
        got = f"unknown command {positional[0]!r}" if positional else "no command"
        raise Fatal(f"{got}\n{USAGE.rstrip()}")
    action, rest = positional[0], positional[1:]
    kind = fault_id = ""
    if action == "add":
        if len(rest) != 1:
            raise Fatal(f"add takes one fault kind\n{USAGE.rstrip()}")
        kind = rest.pop()
    elif action == "lift":
        if bool(rest) == bool(value("all")) or len(rest) > 1:
            raise Fatal(f"lift takes one fault id, or --all\n{USAGE.rstrip()}")
        fault_id = rest.pop() if rest else ""
    if rest:
        raise Fatal(f"unexpected argument {rest[0]!r}\n{USAGE.rstrip()}")
    params: list[tuple[str, str]] = []
    for name in _STRING_PARAMS:
        if value(name):
            params.append((name.replace("-", "_"), str(value(name))))
    if value("count"):
        if int(value("count")) < 1:
            raise Fatal("--count must be at least 1")
        params.append(("count", str(value("count"))))
    if value("duration"):
        params.append(("duration", _seconds(float(value("duration")))))
    if value("reset"):
        params.append(("reset", "true"))
    for pair in value("param"):
        key, sep, val = str(pair).partition("=")
        if not sep or not key:
            raise Fatal(f"--param takes key=value, not {pair!r}")
        params.append((key, val))
    headers = {str(value("acl-http-header")): str(value("user"))} if value("user") else {}
    return FaultCommand(
        action=action,
        admin=str(value("admin-http-address")),
        kind=kind,
        fault_id=fault_id,
        node=str(value("node")),
        params=params,
        all=bool(value("all")),
        json=bool(value("json")),
        headers=headers,
        connect_timeout=float(value("http-client-connect-timeout")),
        request_timeout=float(value("http-client-request-timeout")),
    )


def _scope(fault: dict[str, Any]) -> str:
    parts = [f"{key}={fault[key]}" for key in _SCOPE_KEYS if fault.get(key) not in (None, "")]
    return " ".join(parts) or "*"


def format_listing(listing: FaultListing) -> str:
    """``nsqbox fault list``'s table: one line per fault, then the nodes without faults."""
    rows = [("NODE", "ID", "KIND", "SCOPE", "LEFT", "SINCE")]
    for fault in listing.faults:
        since = fault.get("since")
        when = datetime.fromtimestamp(since).strftime("%H:%M:%S") if since else ""
        row = (fault["node"], str(fault.get("id", "")), str(fault.get("kind", "")))
        rows.append((*row, _scope(fault), left_text(fault), when))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    if not listing.faults:
        lines = ["no faults in force"]
    # A controlled node that is down says so once, on its control line, with the reason
    # its listing row gives ("down (crashed)"), not once there and again on a line of its own.
    down = {(c.role, c.node) for c in listing.control or () if not c.running}
    reasons: dict[tuple[str, str], str] = {}
    for node in listing.nodes:
        if (node.role, node.node) in down:
            reasons[(node.role, node.node)] = node.error
        elif not node.supported or node.error:
            lines.append(f"{node.role} {node.node}: {node.error}")
    for controlled in listing.control or ():
        state = "running"
        if not controlled.running:  # "down (crashed)" -> "DOWN (crashed)"
            reason = reasons.get((controlled.role, controlled.node), "")
            state = "DOWN" + reason.removeprefix("down")
        lines.append(f"node {controlled.index}: {controlled.role} {controlled.node} {state}")
    if listing.message:
        lines.append(listing.message)
    return "\n".join(lines)


async def run_command(source: FaultSource, command: FaultCommand, out: TextIO) -> None:
    """Do ``command`` against ``source`` and print the outcome to ``out``."""
    import msgspec

    from ..admin.control import NodeAction

    answer: Any
    if command.action == "list":
        listing = await source.listing()
        answer = msgspec.to_builtins(listing)
        text = format_listing(listing)
    elif command.action == "add":
        answer = await source.add(command.kind, command.node or None, command.params)
        if "id" in answer:
            text = (
                f"fault {answer['id']} on {answer['node']}: {answer.get('kind')} {_scope(answer)}"
            )
        else:
            text = f"{command.kind} on {answer['node']}: {answer.get('count', 0)}"
    elif command.action == "lift" and command.all:
        lifted, warning = await source.lift_all()
        answer = {"lifted": lifted, "message": warning}
        text = f"lifted {lifted}" + (f"\n{warning}" if warning else "")
    elif command.action == "lift":
        lifted_one = await source.lift(command.node, command.fault_id)
        if not lifted_one:  # nothing was lifted: a script that asked for it must see that
            raise Fatal(f"nsqbox fault lift: no fault {command.fault_id} in force")
        answer = {"lifted": lifted_one}
        text = f"lifted fault {command.fault_id}"
    else:
        answer = await source.node_action(NodeAction(command.action), command.node)
        state = "running" if answer.get("running") else "down"
        text = f"{command.action}: {answer.get('role')} {answer.get('node')} is {state}"
    # JSON escapes control characters itself; the text quotes the nodes (fault errors...)
    out.write((json.dumps(answer) if command.json else visible(text)) + "\n")


async def _run(command: FaultCommand) -> None:
    import httpx

    from ..admin.faults import FaultError
    from ..admin.faults_client import AdminFaults

    timeout = httpx.Timeout(command.request_timeout, connect=command.connect_timeout)
    async with httpx.AsyncClient(timeout=timeout, trust_env=False) as client:
        source = AdminFaults(client, command.admin, headers=command.headers)
        try:
            await run_command(source, command, sys.stdout)
        except FaultError as exc:
            message = str(exc).replace(" with node=", " with --node")
            raise Fatal(visible(f"nsqbox fault {command.action}: {message}")) from None


def main(argv: list[str]) -> int:
    """``nsqbox fault ACTION [flags]``; the exit status."""
    flags = fault_flag_set()
    return run_tool(
        flags,
        argv,
        lambda args: run_trio(_run, parse_command(flags, args)),
        synopsis=USAGE,
        version="nsqbox fault",
    )
