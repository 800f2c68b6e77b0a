#!/usr/bin/env python3
"""A program outside Swift driving a fleet of two Switchboard gateways through their API.

Run by GatewayAPITests (Tests/SwitchboardCLITests) with the venv of scripts/python-tools.sh
(requests and websocket-client from PyPI). Gateway A answers every request; the session it talks
to runs in gateway B, so each send reaches B through the database and each event comes back
through the fleet's event log. Prints one line per step and a final `summary {json}`; exits 1
with `FAIL: reason` when the API does not do what its OpenAPI document says.
"""

import argparse
import json
import sys
import time
import urllib.parse

import requests
import websocket

TIMEOUT = 60


def fail(reason):
    print(f"FAIL: {reason}", flush=True)
    sys.exit(1)


def step(text):
    print(f"step: {text}", flush=True)


def position(event_id):
    transaction, number = event_id.split("-")
    return (int(transaction), int(number))


class Client:
    def __init__(self, base, token):
        self.base = base.rstrip("/")
        self.token = token
        self.http = requests.Session()

    def headers(self, token=None):
        token = self.token if token is None else token
        return {"Authorization": f"Bearer {token}"} if token else {}

    def get(self, path, token=None, **params):
        return self.http.get(self.base + path, headers=self.headers(token), params=params, timeout=10)

    def post(self, path, body):
        return self.http.post(self.base + path, headers=self.headers(), json=body, timeout=10)

    def stream(self, token=None, **query):
        url = self.base.replace("http://", "ws://") + "/v1/events"
        if query:
            url += "?" + urllib.parse.urlencode(query)
        return Stream(websocket.create_connection(url, header=[f"{k}: {v}" for k, v in self.headers(token).items()], timeout=TIMEOUT))


class Stream:
    """A WebSocket of events: every frame kept, in order."""

    def __init__(self, socket):
        self.socket = socket
        self.frames = []

    def next(self):
        frame = json.loads(self.socket.recv())
        self.frames.append(frame)
        return frame

    def until_all(self, wanted):
        """Reads frames until each of `wanted` (name: predicate) matched one, in any order."""
        waiting = dict(wanted)
        deadline = time.monotonic() + TIMEOUT
        while waiting and time.monotonic() < deadline:
            frame = self.next()
            if frame.get("type") == "resync":
                fail(f"the stream lost events: {frame}")
            for name, predicate in list(waiting.items()):
                if predicate(frame):
                    del waiting[name]
        if waiting:
            fail(f"no {', '.join(waiting)} on the event stream within {TIMEOUT} s; frames: {[f.get('type') for f in self.frames]}")

    def events(self):
        """The ids of the event frames read (not ready or position frames)."""
        return [f["id"] for f in self.frames if f["type"] not in ("ready", "position", "resync")]

    def close(self):
        self.socket.close()


def wait_for(what, probe):
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.05)
    fail(f"{what}: not within {TIMEOUT} s")


def message_of(frame):
    return frame.get("message") if frame.get("type") in ("messageAdded", "messageUpdated") else None


def confirmed(client_id):
    def predicate(frame):
        message = message_of(frame)
        return message is not None and message.get("clientId") == client_id and "serverId" in message

    return predicate


def reply_to(text):
    def predicate(frame):
        message = message_of(frame)
        return message is not None and message.get("text") == f"re: {text}"

    return predicate


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--a", required=True, help="gateway A's base URL: the one the client talks to")
    parser.add_argument("--b", required=True, help="gateway B's base URL: the one that runs the session")
    parser.add_argument("--token", required=True)
    parser.add_argument("--session", required=True, help="the session's key, backend/account")
    parser.add_argument("--process-b", required=True, help="gateway B's process name")
    parser.add_argument("--conversation", required=True)
    arguments = parser.parse_args()
    a, b = Client(arguments.a, arguments.token), Client(arguments.b, arguments.token)
    backend, account = arguments.session.split("/", 1)
    session_path = f"/v1/sessions/{urllib.parse.quote(backend, safe='')}/{urllib.parse.quote(account, safe='')}"
    conversation_path = f"{session_path}/conversations/{urllib.parse.quote(arguments.conversation, safe='')}"
    refusals = 0

    # No token, no access: HTTP (401) and the WebSocket (closed with 4401); the document is public.
    document = a.get("/openapi.yaml", token="")
    if document.status_code != 200 or "/v1/events" not in document.text:
        fail(f"/openapi.yaml: {document.status_code}")
    for token in ("", "wrong-token"):
        answer = a.get("/v1/sessions", token=token)
        if answer.status_code != 401 or answer.json()["error"]["code"] != "authenticationFailed":
            fail(f"/v1/sessions with token {token!r}: {answer.status_code} {answer.text}")
        refusals += 1
        # The socket opens and is closed at once with 4401 and the reason.
        refused = a.stream(token=token)
        opcode, data = refused.socket.recv_data(control_frame=True)
        code = int.from_bytes(data[:2], "big") if len(data) >= 2 else None
        if opcode != websocket.ABNF.OPCODE_CLOSE or code != 4401 or b"authenticationFailed" not in data:
            fail(f"the event stream with token {token!r}: opcode {opcode}, close code {code}, {data[2:]!r}")
        refused.close()
        refusals += 1
    step(f"refused without the token: {refusals} requests (HTTP and WebSocket)")

    # The fleet: the session runs in B, and A says so.
    sessions = wait_for(
        "A lists the session as run by B",
        lambda: (lambda listed: listed if any(s["key"] == arguments.session and s["process"] == arguments.process_b for s in listed) else None)(
            a.get("/v1/sessions").json()["sessions"]
        ),
    )
    step(f"sessions: {[(s['key'], s['process']) for s in sessions]}")
    conversations = a.get(f"{session_path}/conversations").json()
    if arguments.conversation not in [c["id"] for c in conversations["conversations"]]:
        fail(f"A does not list the conversation: {conversations}")

    # A stream on A; a send through A into the session B runs, answered by the agent.
    stream = a.stream(session=arguments.session)
    ready = stream.next()
    if ready.get("type") != "ready":
        fail(f"the first frame is {ready}")
    first_position = ready["id"]
    answer = a.post(f"{conversation_path}/messages", {"clientId": "py-1", "text": "hello from python"})
    if answer.status_code != 202 or answer.json()["state"] != "queued":
        fail(f"send through A: {answer.status_code} {answer.text}")
    again = a.post(f"{conversation_path}/messages", {"clientId": "py-1", "text": "hello from python"})
    if again.status_code not in (200, 202):
        fail(f"the repeated send: {again.status_code} {again.text}")
    stream.until_all({"py-1 confirmed": confirmed("py-1"), "the agent's answer to py-1": reply_to("hello from python")})
    step("sent through A, confirmed and answered on A's stream")

    # Cut the stream; send through B meanwhile; resume after the last event seen.
    last = stream.frames[-1]["id"]
    first_run = stream.events()
    stream.close()
    answer = b.post(f"{conversation_path}/messages", {"clientId": "py-2", "text": "while cut"})
    if answer.status_code != 202:
        fail(f"send through B: {answer.status_code} {answer.text}")
    wait_for("py-2 sent (A's view)", lambda: a.get(f"{session_path}/messages/py-2").json().get("message", {}).get("state") == "sent")
    resumed = a.stream(session=arguments.session, after=last)
    if resumed.next().get("type") != "ready":
        fail(f"the resumed stream began with {resumed.frames[0]}")
    resumed.until_all({"py-2 confirmed after the resume": confirmed("py-2"), "the answer to py-2 after the resume": reply_to("while cut")})
    second_run = resumed.events()
    resumed.close()
    step(f"cut after {len(first_run)} events; resumed from {last}: {len(second_run)} events")

    # The proof: one stream from the start has exactly the events of the two, in order.
    # Read up to the last event the two runs received (whichever kind it is).
    received = first_run + second_run
    whole = a.stream(session=arguments.session, after=first_position)
    whole.next()
    whole.until_all({"the last event received": lambda frame: frame.get("id") == received[-1]})
    everything = whole.events()
    whole.close()
    duplicated = len(received) - len(set(received))
    missing = len(set(everything) - set(received))
    out_of_order = sum(1 for x, y in zip(received, received[1:]) if position(x) >= position(y))
    extra = len(set(received) - set(everything))
    step(f"events: {len(received)} received over the cut, {len(everything)} in the log; missing {missing}, duplicated {duplicated}, out of order {out_of_order}, unknown {extra}")
    if duplicated or missing or out_of_order or extra or received != everything:
        fail(f"the resumed stream lost, repeated or reordered events: received {received}, the log {everything}; types {[(f['id'], f['type']) for f in whole.frames]}")

    # History by pages, newest page first, each oldest first.
    pages, before, texts = 0, None, []
    while True:
        query = {"limit": 2} if before is None else {"limit": 2, "before": before}
        page = a.get(f"{conversation_path}/messages", **query).json()
        texts = [m["text"] for m in page["messages"]] + texts
        pages += 1
        before = page["before"]
        if before is None or pages > 50:
            break
    expected = ["hello from python", "re: hello from python", "while cut", "re: while cut"]
    if [t for t in texts if t in expected] != expected or len(texts) != len(set(texts)):
        fail(f"history in {pages} pages: {texts}")
    step(f"history: {len(texts)} messages in {pages} pages of 2")

    # The repeated send is answered with the stored message: nothing is sent twice.
    repeat = a.post(f"{conversation_path}/messages", {"clientId": "py-1", "text": "hello from python"})
    if repeat.status_code != 200 or repeat.json()["message"]["state"] != "sent":
        fail(f"a repeat of py-1 after it was sent: {repeat.status_code} {repeat.text}")
    no_id = a.post(f"{conversation_path}/messages", {"text": "no id"})
    if no_id.status_code != 400:
        fail(f"a send without a client id: {no_id.status_code}")

    # Mark read through A: B's session tells the server, the unread count falls to 0.
    unread_before = next(c["unreadCount"] for c in a.get(f"{session_path}/conversations").json()["conversations"] if c["id"] == arguments.conversation)
    answer = a.post(f"{conversation_path}/read", {})
    if answer.status_code != 202:
        fail(f"mark read: {answer.status_code} {answer.text}")
    wait_for(
        "the unread count at 0",
        lambda: next(c["unreadCount"] for c in a.get(f"{session_path}/conversations").json()["conversations"] if c["id"] == arguments.conversation) == 0,
    )
    step(f"marked read through A: unread {unread_before} -> 0")
    print(
        "summary "
        + json.dumps(
            {
                "refusals": refusals,
                "events": len(received),
                "missing": missing,
                "duplicated": duplicated,
                "outOfOrder": out_of_order,
                "historyPages": pages,
                "unreadBefore": unread_before,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
