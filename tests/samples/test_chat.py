"""chat traced by the real ``distea run``: a threaded TCP server and three scripted clients.

The sample (sample_systems/chat): each client connects (`ChatSession.__init__`),
sends ``JOIN`` and waits for ``WELCOME`` and ``ROOM`` (`join_room`); the room
sends ``ROOM`` to everybody once all three have joined. Then, each step
caused by a line the actor has *received*:

    alice SAY hello            (alice_script -> send_broadcast)
    bob   TELL carol ...       (bob_script, after "MSG alice" -> send_private)
    carol SAY thanks bob       (carol_script, after "PRIV bob" -> send_broadcast)
    alice LEAVE                (after "MSG carol"), bob LEAVE (after "LEFT alice"),
    carol LEAVE                (after "LEFT bob")

The server delivers every line under the room lock, so each client's stream is
the same in every run; the byte offsets below are computed from those lines.
A client's own stream (server -> client):

    alice: WELCOME alice | ROOM ... | MSG carol thanks bob | BYE
    bob:   WELCOME bob | ROOM ... | MSG alice hello everyone | MSG carol thanks bob
           | LEFT alice | BYE
    carol: WELCOME carol | ROOM ... | MSG alice hello everyone | PRIV bob psst, alice is here
           | LEFT alice | LEFT bob | BYE

Where the impact reaches a client through the server, the tests bound its
start from above (it must arrive by the relayed line that causally carries
it) rather than pin it: the server is one process with a thread per client,
its clock is per process, so a line another handler thread sends to that
client after the carrying receive is rightly "after" it too, and whether
such a line exists depends on thread scheduling.
"""

from __future__ import annotations

import pytest

from tests.samples.support import (
    LAUNCHER_BEFORE_CHILDREN_RUN,
    SampleRun,
    check_clean_channel,
    check_launcher_channels,
    check_never_impacted,
    check_processes,
    check_stdout,
    run_sample,
    stable_name,
)

CLIENT, SERVER = "sample_systems.chat.client", "sample_systems.chat.server"
CLIENTS = ("alice", "bob", "carol")
ROOM = "ROOM alice,bob,carol\n"


def line_bytes(*lines: str) -> int:
    return sum(len(line.encode()) for line in lines)


# Bytes of each client's stream before the first line that any query below
# could have caused (all lines listed in the module docstring).
BEFORE_MSG_ALICE = {  # the first relayed broadcast each client receives
    "bob": line_bytes("WELCOME bob\n", ROOM),
    "carol": line_bytes("WELCOME carol\n", ROOM),
}
ALICE_BEFORE_MSG_CAROL = line_bytes("WELCOME alice\n", ROOM)
CAROL_BEFORE_PRIV = line_bytes("WELCOME carol\n", ROOM, "MSG alice hello everyone\n")
BOB_BEFORE_MSG_CAROL = line_bytes("WELCOME bob\n", ROOM, "MSG alice hello everyone\n")


@pytest.fixture(scope="module")
def sr(tmp_path_factory: pytest.TempPathFactory) -> SampleRun:
    return run_sample("chat", tmp_path_factory.mktemp("chat"))


def test_processes_and_output(sr: SampleRun) -> None:
    check_processes(sr, {
        "launcher": "sample_systems.chat",
        "server": SERVER,
        "alice": CLIENT,
        "bob": CLIENT,
        "carol": CLIENT,
    })
    check_stdout(sr)
    assert "3 members joined; relayed 2 broadcast and 1 private messages" in sr.traced.stdout


def test_channels(sr: SampleRun) -> None:
    check_launcher_channels(sr)
    # Every byte a client or the server wrote was read by the other end, and
    # every receive pairs with one send, even the lines the server writes to
    # one client's socket from another client's handler thread.
    check_clean_channel(sr, "tcp")
    assert set(sr.show["messages"]["by_kind"]) == {"proc", "exit", "pipe", "tcp"}


def test_never_impacted(sr: SampleRun) -> None:
    # ChatSession.__init__ only connects; it returns before the client sends
    # JOIN, and the client has received nothing then. Every query starts in a
    # client after the room is complete, which needs all three JOINs. (join_room
    # is not listed: a slow reader can get ROOM and "MSG alice" in one recv.)
    check_never_impacted(sr)


def test_send_private(sr: SampleRun) -> None:
    res = sr.impact(f"{CLIENT}.send_private")
    # bob: from his own send_private; his join_room and connection came before.
    assert sr.start(res, "bob") == sr.first("bob", f"{CLIENT}.send_private")
    sr.expect(res, "bob", impacted=[f"{CLIENT}.leave_room", f"{CLIENT}.bob_script"],
              not_impacted=[f"{CLIENT}.join_room", f"{CLIENT}.ChatSession.__init__"])
    # server: from the TELL line (bob -> server edge). Every join completed
    # before bob could act: he waits for ROOM and then MSG alice, which alice's
    # handler thread can deliver only after the joining thread released the
    # lock, and that thread returns from join without giving up the GIL in
    # between. carol's reply is relayed by broadcast_message after, and
    # everybody leaves after.
    assert sr.start_event(res, "server").channel in sr.send_channels("bob", "tcp")
    sr.expect(res, "server",
              impacted=[f"{SERVER}.ChatRoom.send_private", f"{SERVER}.ChatRoom.broadcast_message",
                        f"{SERVER}.ChatRoom.leave", f"{SERVER}.deliver"],
              not_impacted=[f"{SERVER}.ChatRoom.join", f"{SERVER}.ChatServer.__init__"])
    # carol: only through two edges (bob -> server -> carol), from the receive
    # that reads the PRIV line; her public reply comes after it.
    assert sr.start(res, "carol") <= sr.first_recv_past("carol", CAROL_BEFORE_PRIV)
    sr.expect(res, "carol",
              impacted=[f"{CLIENT}.send_broadcast", f"{CLIENT}.leave_room",
                        f"{CLIENT}.carol_script"],
              not_impacted=[f"{CLIENT}.ChatSession.__init__"])
    # Not pinned: carol's join_room (it may read ROOM, MSG alice and PRIV in one recv).
    # alice: only through carol's reply (four edges); her hello went out before
    # bob could react to it.
    assert sr.start(res, "alice") <= sr.first_recv_past("alice", ALICE_BEFORE_MSG_CAROL)
    sr.expect(res, "alice", impacted=[f"{CLIENT}.leave_room"],
              not_impacted=[f"{CLIENT}.send_broadcast", f"{CLIENT}.join_room"])
    sr.expect(res, "launcher", impacted=["sample_systems._launch.RoleGroup.finish"],
              not_impacted=LAUNCHER_BEFORE_CHILDREN_RUN)


def test_broadcast_message(sr: SampleRun) -> None:
    res = sr.impact(f"{SERVER}.ChatRoom.broadcast_message")
    # server: from the first broadcast (alice's hello). Not pinned: ChatRoom.join.
    # join delivers ROOM to alice first (sorted order) and then to bob and carol
    # while holding the lock, so alice's SAY can enter broadcast_message (which
    # waits for the lock) before the joining thread has returned from join:
    # join may really still be executing at the start. Only its set-up is safe.
    sr.expect(res, "server", impacted=[f"{SERVER}.ChatRoom.send_private"],
              not_impacted=[f"{SERVER}.ChatServer.__init__"])
    # Each client, through the server -> client edge, from the first relayed MSG
    # it reads. alice is not relayed her own hello: her first is carol's reply.
    for name, offset in BEFORE_MSG_ALICE.items():
        assert sr.start(res, name) <= sr.first_recv_past(name, offset), name
    assert sr.start(res, "alice") <= sr.first_recv_past("alice", ALICE_BEFORE_MSG_CAROL)
    # bob's TELL reacts to the relayed hello; carol's reply to the PRIV after it.
    sr.expect(res, "bob", impacted=[f"{CLIENT}.send_private", f"{CLIENT}.leave_room"],
              not_impacted=[f"{CLIENT}.ChatSession.__init__"])
    sr.expect(res, "carol", impacted=[f"{CLIENT}.send_broadcast", f"{CLIENT}.leave_room"])
    # alice said hello before the server relayed anything.
    sr.expect(res, "alice", impacted=[f"{CLIENT}.leave_room"],
              not_impacted=[f"{CLIENT}.send_broadcast", f"{CLIENT}.join_room"])
    # Not pinned: bob's and carol's join_room (ROOM and MSG alice can share a recv).


def test_carol_script(sr: SampleRun) -> None:
    res = sr.impact(f"{CLIENT}.carol_script")
    # carol: from carol_script, which starts after join_room returned.
    assert sr.start(res, "carol") == sr.first("carol", f"{CLIENT}.carol_script")
    sr.expect(res, "carol", impacted=[f"{CLIENT}.send_broadcast"],
              not_impacted=[f"{CLIENT}.join_room"])
    # server: carol's first line after JOIN is her SAY (carol -> server edge).
    carol_out = sr.send_channels("carol", "tcp")
    assert sr.start(res, "server") == sr.first_recv_past(
        "server", len(b"JOIN carol\n"), channels=carol_out)
    # Not pinned: the server's ChatRoom.send_private. It sends the PRIV that
    # carol reacts to, and only then returns; bob's handler thread could be
    # descheduled between the two long enough for carol's SAY to be received
    # first. join is safe: after releasing the lock it returns without giving
    # up the GIL, and three cross-process hops separate it from carol's SAY.
    sr.expect(res, "server",
              impacted=[f"{SERVER}.ChatRoom.broadcast_message", f"{SERVER}.ChatRoom.leave"],
              not_impacted=[f"{SERVER}.ChatRoom.join"])
    # bob and alice: only through the server, from the relayed "MSG carol".
    assert sr.start(res, "bob") <= sr.first_recv_past("bob", BOB_BEFORE_MSG_CAROL)
    assert sr.start(res, "alice") <= sr.first_recv_past("alice", ALICE_BEFORE_MSG_CAROL)
    sr.expect(res, "bob", impacted=[f"{CLIENT}.leave_room"],
              not_impacted=[f"{CLIENT}.send_private", f"{CLIENT}.join_room"])
    sr.expect(res, "alice", impacted=[f"{CLIENT}.leave_room"],
              not_impacted=[f"{CLIENT}.send_broadcast", f"{CLIENT}.join_room"])
    # The shortest chain to bob's leave_room: carol -> server -> bob, two messages.
    exp = sr.run.explain(f"{CLIENT}.carol_script", f"{CLIENT}.leave_room",
                         process=sr.keys["bob"])
    assert exp.impacted and exp.messages == 2
    assert [stable_name(sr.run.processes[s.process]) for s in exp.steps if s.action != "runs"] \
        == ["carol", "carol", "server", "server", "bob"]
