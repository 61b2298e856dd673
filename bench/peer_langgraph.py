"""Peer anchor: LangGraph interrupt/resume cycles with a durable SQLite checkpointer.

Workload (same as the project's pause/resume benchmark): a 3-step workflow
  prepare (pure) -> gate (human approval, pauses) -> act (pure)
Each cycle: start a run until it pauses (state persisted to SQLite on disk),
then resume it by its thread id with an approval, to completion.
Usage: peer_langgraph.py [--concurrency C] N DBPATH
Without --concurrency (or with 1): one stream, the synchronous SqliteSaver,
all N starts and then all N resumes (read by benches/cycles.rs).
With --concurrency C > 1: C concurrent runs, LangGraph's documented way for
concurrent use of SQLite (SqliteSaver "does not scale to multiple threads;
consider AsyncSqliteSaver"): one AsyncSqliteSaver shared by C asyncio tasks,
each running its share of the N cycles (start until the interrupt, then
resume) back to back (read by benches/concurrent.rs).
Prints one line of key=value pairs: cycles/s, the SQLite settings the
checkpointer actually ran with (SqliteSaver sets journal_mode=WAL;
synchronous stays at the python sqlite3 default), the langgraph version and
the database's size; every cycle's end is checked (completed == N).
"""
import argparse, asyncio, sys, time, uuid, os
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

def graph():
    g = StateGraph(S)
    g.add_node("prepare", prepare); g.add_node("gate", gate); g.add_node("act", act)
    g.add_edge(START, "prepare"); g.add_edge("prepare", "gate"); g.add_edge("gate", "act"); g.add_edge("act", END)
    return g

def db_bytes(path):
    # The WAL holds what has not been checkpointed into the file yet.
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))

def settings(path):
    # What the file ran with, read on a connection of our own.
    conn = sqlite3.connect(path)
    journal_mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    conn.close()
    return journal_mode

def one_stream(n, path):
    conn = sqlite3.connect(path, check_same_thread=False)
    saver = SqliteSaver(conn)
    app = graph().compile(checkpointer=saver)
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
    synchronous = ["OFF", "NORMAL", "FULL", "EXTRA"][conn.execute("PRAGMA synchronous").fetchone()[0]]
    return ok, t2 - t0, f"pause_per_s={n/(t1-t0):.2f} resume_per_s={n/(t2-t1):.2f} synchronous={synchronous}"

async def concurrent(n, path, c):
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    async with AsyncSqliteSaver.from_conn_string(path) as saver:
        app = graph().compile(checkpointer=saver)

        async def stream(first):
            ok = 0
            for i in range(first, n, c):
                cfg = {"configurable": {"thread_id": str(uuid.uuid4())}}
                paused = await app.ainvoke({"order": i}, cfg)
                assert "__interrupt__" in paused, paused
                out = await app.ainvoke(Command(resume={"approved": True}), cfg)
                ok += out.get("done") == "refunded"
            return ok

        t0 = time.perf_counter()
        oks = await asyncio.gather(*(stream(k) for k in range(c)))
        elapsed = time.perf_counter() - t0
        async with saver.conn.execute("PRAGMA synchronous") as cur:
            synchronous = ["OFF", "NORMAL", "FULL", "EXTRA"][(await cur.fetchone())[0]]
    return sum(oks), elapsed, f"concurrency={c} saver=AsyncSqliteSaver synchronous={synchronous}"

def main():
    args = argparse.ArgumentParser()
    args.add_argument("--concurrency", type=int, default=1)
    args.add_argument("n", type=int)
    args.add_argument("path")
    a = args.parse_args()
    if os.path.exists(a.path): os.remove(a.path)
    if a.concurrency > 1:
        ok, elapsed, extra = asyncio.run(concurrent(a.n, a.path, a.concurrency))
    else:
        ok, elapsed, extra = one_stream(a.n, a.path)
    assert ok == a.n, f"{ok} of {a.n} cycles completed"
    print(f"cycles_per_s={a.n/elapsed:.2f} completed={ok} {extra} journal_mode={settings(a.path)}"
          f" langgraph={version('langgraph')} sqlite={sqlite3.sqlite_version} db_bytes={db_bytes(a.path)}")

main()
