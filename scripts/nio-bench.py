#!/usr/bin/env python3
"""The peer's side of `switchboard bench --only peer` (issue #33): matrix-nio, the Python Matrix
client library bot and integration authors pick, doing what the Switchboard side does, with its
own idiomatic store.

    nio-bench.py PHASE HOMESERVER USER PASSWORD STORE [ROOM] [COUNT]

matrix-nio keeps no messages (its store is end-to-end crypto state), so the messages and the sync
token go where a nio bot keeps them: a sqlite3 file of its own, WAL, synchronous=NORMAL (as
Switchboard's SQLite store), one transaction per sync answer. The sync filter is Switchboard's
default (20 events of timeline per room); a room whose timeline comes `limited` is filled back
with /messages until a stored event, as Switchboard's engine fills a gap.

Phases (each prints tagged lines `peer KEY VALUE` the bench reads):
  first-message   log in with an empty store; seconds until the first message is stored
  echo ROOM N     log in, sync, then N sends one after another; the milliseconds from each send
                  until its own event comes back through /sync and is stored
  offline         log in, sync once, keep the token and the login in the store, exit
  catch-up ROOM N come back with the store of `offline`; seconds until N messages missed in ROOM
                  are stored, and the resident memory after (`peer rss BYTES`)
"""

import asyncio
import sqlite3
import sys
import time

from nio import AsyncClient, MessageDirection, RoomMessagesResponse, RoomMessageText, RoomSendResponse, SyncResponse

SYNC_FILTER = {"room": {"timeline": {"limit": 20}}}


def say(key, value):
    print(f"peer {key} {value}", flush=True)


class Store:
    """The bot's own store: the messages it has seen and what it needs to come back."""

    def __init__(self, path):
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS messages (event_id TEXT PRIMARY KEY, room_id TEXT NOT NULL, sender TEXT NOT NULL, body TEXT, ts INTEGER NOT NULL)"
        )
        self.db.execute("CREATE INDEX IF NOT EXISTS messages_by_room ON messages (room_id, ts)")
        self.db.execute("CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value TEXT NOT NULL)")

    def put(self, events, state=None):
        """Stores the text messages of `events` ((event, room id) pairs) and `state` in one
        transaction; returns the new ones."""
        rows = [(e.event_id, room_id, e.sender, e.body, e.server_timestamp) for e, room_id in events if isinstance(e, RoomMessageText)]
        self.db.execute("BEGIN")
        new = [row for row in rows if self.db.execute("INSERT OR IGNORE INTO messages VALUES (?, ?, ?, ?, ?)", row).rowcount == 1]
        for key, value in (state or {}).items():
            self.db.execute("INSERT OR REPLACE INTO state VALUES (?, ?)", (key, value))
        self.db.execute("COMMIT")
        return new

    def has(self, event_id):
        return self.db.execute("SELECT 1 FROM messages WHERE event_id = ?", (event_id,)).fetchone() is not None

    def knows(self, room_id):
        return self.db.execute("SELECT 1 FROM messages WHERE room_id = ? LIMIT 1", (room_id,)).fetchone() is not None

    def get(self, key):
        row = self.db.execute("SELECT value FROM state WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None


class Bot:
    def __init__(self, homeserver, user, store):
        self.client = AsyncClient(homeserver, user)
        self.store = store
        self.new_messages = asyncio.Queue()
        self.client.add_response_callback(self.on_sync, SyncResponse)

    async def on_sync(self, response):
        """Stores what a sync answer brought, every room in one transaction, with the token;
        fills back a room whose timeline was cut first. (nio runs response callbacks in
        `sync_forever` only: a phase that calls `sync` itself hands the answer here.)"""
        rows = []
        for room_id, room in response.rooms.join.items():
            events = list(room.timeline.events)
            # A gap only where the store holds the room's earlier messages (the first sync
            # starts at the window, as Switchboard's does; older ones are history).
            if room.timeline.limited and events and self.store.knows(room_id) and not self.store.has(events[0].event_id):
                events = await self.backfill(room_id, room.timeline.prev_batch) + events
            rows += [(event, room_id) for event in events]
        for row in self.store.put(rows, {"next_batch": response.next_batch}):
            self.new_messages.put_nowait(row)

    async def backfill(self, room_id, start):
        """The events before a cut timeline, back to the first one the store has."""
        older = []
        while start:
            # Switchboard's Matrix history page is 50 too.
            page = await self.client.room_messages(room_id, start=start, limit=50, direction=MessageDirection.back)
            if not isinstance(page, RoomMessagesResponse):
                raise RuntimeError(f"backfill: {page}")
            for event in page.chunk:
                if isinstance(event, RoomMessageText) and self.store.has(event.event_id):
                    return list(reversed(older))
                older.append(event)
            start = page.end if page.chunk else None
        return list(reversed(older))

    async def login(self, password):
        answer = await self.client.login(password, device_name="nio-bench")
        if not hasattr(answer, "access_token"):
            raise RuntimeError(f"login: {answer}")
        self.store.put([], {"access_token": answer.access_token, "device_id": answer.device_id, "user_id": answer.user_id})

    async def first_sync(self):
        """One sync now, stored (nio runs response callbacks only inside `sync_forever`)."""
        first = await self.client.sync(timeout=0, sync_filter=SYNC_FILTER)
        if not isinstance(first, SyncResponse):
            raise RuntimeError(f"sync: {first}")
        await self.on_sync(first)
        return first

    def restore(self):
        self.client.restore_login(self.store.get("user_id"), self.store.get("device_id"), self.store.get("access_token"))

    def sync_forever(self, since=None):
        return asyncio.create_task(self.client.sync_forever(timeout=30000, sync_filter=SYNC_FILTER, since=since))

    async def close(self, syncing=None):
        if syncing:
            syncing.cancel()
            try:
                await syncing
            except asyncio.CancelledError:
                pass
        await self.client.close()


def resident_bytes():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


async def main(phase, homeserver, user, password, path, room=None, count=0):
    started = time.perf_counter()
    bot = Bot(homeserver, user, Store(path))
    syncing = None
    try:
        if phase == "first-message":
            await bot.login(password)
            syncing = bot.sync_forever()
            await bot.new_messages.get()
            say("first-message", time.perf_counter() - started)
        elif phase == "echo":
            await bot.login(password)
            first = await bot.first_sync()
            while not bot.new_messages.empty():
                bot.new_messages.get_nowait()
            syncing = bot.sync_forever(since=first.next_batch)
            samples = []
            for index in range(count):
                sent_at = time.perf_counter()
                answer = await bot.client.room_send(room, "m.room.message", {"msgtype": "m.text", "body": f"echo {index}"})
                if not isinstance(answer, RoomSendResponse):
                    raise RuntimeError(f"send: {answer}")
                while True:
                    event_id, *_ = await bot.new_messages.get()
                    if event_id == answer.event_id:
                        break
                samples.append((time.perf_counter() - sent_at) * 1000)
            say("echo", ",".join(f"{sample:.3f}" for sample in samples))
        elif phase == "offline":
            await bot.login(password)
            await bot.first_sync()
            if not bot.store.knows(room):
                raise RuntimeError(f"the first sync brought no message of {room}")
            say("offline", "ready")
        elif phase == "catch-up":
            bot.restore()
            syncing = bot.sync_forever(since=bot.store.get("next_batch"))
            missed = 0
            while missed < count:
                _, room_id, _, body, _ = await bot.new_messages.get()
                if room_id == room and body.startswith("missed "):
                    missed += 1
            say("catch-up", time.perf_counter() - started)
            say("rss", resident_bytes())
        else:
            raise SystemExit(f"nio-bench: unknown phase {phase}")
    finally:
        await bot.close(syncing)


if __name__ == "__main__":
    if len(sys.argv) < 6:
        raise SystemExit(__doc__)
    arguments = sys.argv[1:]
    asyncio.run(main(*arguments[:6], *([int(arguments[6])] if len(arguments) > 6 else [])))
