"""Peer anchor: LangGraph interrupt/resume cycles with a durable SQLite checkpointer.

Workload (same as the project's pause/resume benchmark): a 3-step workflow
  prepare (pure) -> gate (human approval, pauses) -> act (pure)
Each cycle: start a run until it pauses (state persisted to SQLite on disk),
then resume it by its thread id with an approval, to completion.
Usage: peer_langgraph.py N DBPATH
Prints one line of key=value pairs (read by benches/cycles.rs): cycles/s,
pause/s, resume/s, the SQLite settings the checkpointer actually ran with
(SqliteSaver sets journal_mode=WAL; synchronous stays at the python sqlite3
default), the langgraph version and the database's size.
"""
import sys, time, uuid, os
from importlib.metadata import version
from typing import TypedDict
from langgraph.graph import StateGraph, START, END
from langgraph.types import interrupt, Command
from langgraph.checkpoint.sqlite import SqliteSaver
import sqlite3

class S(TypedDict, total=False):
    order: int
    amount: int
    approved: bool
    done: str

def prepare(s): return {"amount": s["order"] * 2}
def gate(s):
    d = interrupt({"message": f"refund {s['amount']}?"})
    return {"approved": bool(d.get("approved"))}
def act(s): return {"done": "refunded" if s.get("approved") else "skipped"}

def db_bytes(path):
    # The WAL holds what has not been checkpointed into the file yet.
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))

def main():
    n = int(sys.argv[1]); path = sys.argv[2]
    if os.path.exists(path): os.remove(path)
    conn = sqlite3.connect(path, check_same_thread=False)
    saver = SqliteSaver(conn)
    g = StateGraph(S)
    g.add_node("prepare", prepare); g.add_node("gate", gate); g.add_node("act", act)
    g.add_edge(START, "prepare"); g.add_edge("prepare", "gate"); g.add_edge("gate", "act"); g.add_edge("act", END)
    app = g.compile(checkpointer=saver)
    t0 = time.perf_counter()
    keys = []
    for i in range(n):
        cfg = {"configurable": {"thread_id": str(uuid.uuid4())}}
        app.invoke({"order": i}, cfg)
        keys.append(cfg)
    t1 = time.perf_counter()
    ok = 0
    for cfg in keys:
        out = app.invoke(Command(resume={"approved": True}), cfg)
        ok += out.get("done") == "refunded"
    t2 = time.perf_counter()
    assert ok == n, ok
    journal_mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    synchronous = ["OFF", "NORMAL", "FULL", "EXTRA"][conn.execute("PRAGMA synchronous").fetchone()[0]]
    print(f"cycles_per_s={n/(t2-t0):.2f} pause_per_s={n/(t1-t0):.2f} resume_per_s={n/(t2-t1):.2f}"
          f" journal_mode={journal_mode} synchronous={synchronous} langgraph={version('langgraph')}"
          f" sqlite={sqlite3.sqlite_version} db_bytes={db_bytes(path)}")

main()
