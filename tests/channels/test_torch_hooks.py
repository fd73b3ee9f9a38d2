"""The process-group hook path of the torch channel, in process, against FAKES.

A **FAKE** process group (a plain Python class with ``register_pre_hook``,
``rank``, ``_get_sequence_number_for_group``) and a **FAKE**
``torch.distributed`` module whose ``all_reduce``/``broadcast`` fire the
group's hooks the way the C++ ``ProcessGroup`` does. No torch needed: this
checks the recording rules (roles, when a receive is recorded, unseen
operations) on their own; tests/channels/test_torch_training.py runs real
torch.
"""

from __future__ import annotations

import types
from typing import Any

from distea.tracer.channels.torch_distributed import TorchDistributedChannel
from tests.channels.test_torch_distributed import FakeSession


class OpName:
    """Stands in for the ``HookOpName`` enum member."""

    VALUES = {"ALLREDUCE": 3, "BROADCAST": 2, "SEND": 0, "RECV": 1}

    def __init__(self, name: str) -> None:
        self.name = name

    def __int__(self) -> int:
        return self.VALUES[self.name]


class FakeGroup:
    def __init__(self, name: str, rank: int) -> None:
        self.group_name = name
        self._rank = rank
        self.hooks: dict[int, Any] = {}
        self.issued = 0

    def register_pre_hook(self, hook_id: int, hook: Any) -> None:
        self.hooks[hook_id] = hook

    def unregister_pre_hook(self, hook_id: int) -> None:
        self.hooks.pop(hook_id, None)

    def rank(self) -> int:
        return self._rank

    def _get_sequence_number_for_group(self) -> int:
        return self.issued

    def issue(self, op: str, root: int = -1) -> None:
        """What the C++ ProcessGroup does before every operation."""
        self.issued += 1
        for hook in list(self.hooks.values()):
            hook(types.SimpleNamespace(name=OpName(op), root=root, async_op=True))


class Work:
    def wait(self, timeout: Any = None) -> bool:
        return True


def fake_dist(group: FakeGroup) -> Any:
    dist = types.ModuleType("torch.distributed")

    class GroupMember:
        WORLD = group

    def all_reduce(tensor: Any, op: Any = None, group: Any = None, async_op: bool = False):
        (group or GroupMember.WORLD).issue("ALLREDUCE")
        return Work() if async_op else None

    def broadcast(tensor: Any, src: Any = None, group: Any = None, async_op: bool = False,
                  group_src: Any = None):
        (group or GroupMember.WORLD).issue("BROADCAST", src)
        return Work() if async_op else None

    dist.GroupMember, dist.Work = GroupMember, Work  # type: ignore[attr-defined]
    dist.all_reduce, dist.broadcast = all_reduce, broadcast  # type: ignore[attr-defined]
    dist.get_rank = lambda group=None: group_of_world.rank()  # type: ignore[attr-defined]
    dist.is_available = lambda: True  # type: ignore[attr-defined]
    dist.distributed_c10d = dist  # type: ignore[attr-defined]
    dist._world = types.SimpleNamespace(pg_map={group: ("gloo", None)})  # type: ignore[attr-defined]
    group_of_world = group
    return dist


def hooked(rank: int) -> tuple[TorchDistributedChannel, FakeSession, FakeGroup, Any]:
    session = FakeSession()
    channel = TorchDistributedChannel()
    channel.session = session  # type: ignore[assignment]
    group = FakeGroup("0", rank)
    dist = fake_dist(group)
    channel.patch_module(dist)
    channel.attach_groups()
    return channel, session, group, dist


def test_operations_issued_from_cpp_are_recorded_at_issue() -> None:
    channel, session, group, _ = hooked(rank=1)
    try:
        group.issue("ALLREDUCE")  # DDP's reducer: no Python call around it
        group.issue("BROADCAST", root=0)  # rank 1 is a leaf
        assert session.records == [
            ("send", "WORLD:0", 0, {"op": "allreduce", "role": "all"}),
            ("recv", "WORLD:0", 0, {"op": "allreduce", "role": "all"}),
            ("recv", "WORLD:1", 0, {"op": "broadcast", "role": "leaf"}),
        ]
    finally:
        channel.uninstall()
    assert not group.hooks


def test_python_async_call_receives_at_wait() -> None:
    channel, session, _, dist = hooked(rank=0)
    try:
        work = dist.all_reduce(object(), async_op=True)
        assert [r[0] for r in session.records] == ["send"]  # no receive before wait()
        assert session.records[0][3] == {"op": "all_reduce", "role": "all"}
        work.wait()
        assert [r[0] for r in session.records] == ["send", "recv"]
        dist.broadcast(object(), src=0)  # rank 0 is the root: sends only
        assert session.records[2] == ("send", "WORLD:1", 0, {"op": "broadcast", "role": "root"})
        assert len(session.records) == 3
    finally:
        channel.uninstall()


def test_operations_nobody_saw_are_reported() -> None:
    channel, session, group, _ = hooked(rank=0)
    try:
        group.issue("ALLREDUCE")
        group.issued += 2  # two operations that ran no hook
        channel.report_unseen()
        unseen = [r for r in session.records if r[1] == "WORLD:unseen"]
        assert [r[0] for r in unseen] == ["send", "recv"]
        assert unseen[0][3]["unseen"] == 2 and "2 operations" in unseen[0][3]["what"]
        channel.report_unseen()  # reported once
        assert len([r for r in session.records if r[1] == "WORLD:unseen"]) == 2
    finally:
        channel.uninstall()
