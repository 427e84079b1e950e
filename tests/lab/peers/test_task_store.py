"""Where the lab's tasks are kept (lab/peers/tasks.py): one process's memory, or a SQLite file instances share."""

import time

from click.testing import CliRunner

from mcpbench.lab.cli import lab
from mcpbench.lab.peers.tasks import MemoryStore, SqliteStore, _Task


def test_a_task_added_by_one_store_is_read_and_cancelled_by_another_on_the_same_file(tmp_path):
    path = str(tmp_path / "tasks.db")
    one, other = SqliteStore(path), SqliteStore(path)  # two instances naming one file
    task = _Task("t1", 60_000, time.time())
    one.add(task)
    seen = other.get("t1")
    assert seen is not None and seen.status() == "working" and seen.wire()["createdAt"] == task.wire()["createdAt"]
    seen.cancelled = time.time()
    other.save(seen)
    assert one.get("t1").status() == "cancelled" and [t.id for t in one.all()] == ["t1"]
    # a task asking for input, answered through the other store (`tasks/update` on another instance)
    asking = _Task("t2", 0, time.time(), asks=True)
    one.add(asking)
    assert other.get("t2").status() == "input_required" and "confirm" in other.get("t2").wire()["inputRequests"]
    answered = other.get("t2")
    answered.answered, answered.reply = time.time(), "accept"
    other.save(answered)
    assert one.get("t2").status() == "completed" and one.get("t2").result()["content"][0]["text"].endswith("(accept)")
    assert MemoryStore().get("t1") is None  # an instance keeping tasks in memory knows none of them


def test_task_store_needs_tasks():
    result = CliRunner().invoke(lab, ["serve", "--transport", "streamable-http", "--task-store", "x.db"])
    assert result.exit_code == 2 and "--task-store needs --tasks" in result.output
