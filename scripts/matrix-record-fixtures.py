#!/usr/bin/env python3
"""Records the Matrix fixtures of Tests/Fixtures/matrix/ from a real Synapse (issue #16).

    scripts/synapse.sh run /tmp/synapse 18448 &    # a throwaway homeserver
    scripts/matrix-record-fixtures.py http://127.0.0.1:18448 Tests/Fixtures/matrix

Registers two users by the shared secret of scripts/synapse.sh, has them talk in a room (text,
a notice, an edit, a redaction, typing, a read receipt, a name and topic) and writes the server's
answers as they came: the initial sync, incremental syncs, a limited sync with its gap, a
/messages page and error bodies. Standard library only.
"""
import hashlib, hmac, json, os, sys, time, urllib.error, urllib.parse, urllib.request

base, out = sys.argv[1].rstrip("/"), sys.argv[2]
secret = b"switchboard-test-registration-secret"
os.makedirs(out, exist_ok=True)


def call(method, path, body=None, token=None, query=None):
    url = base + path + ("?" + urllib.parse.urlencode(query) if query else "")
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def save(name, value):
    with open(os.path.join(out, name), "w") as file:
        json.dump(value, file, indent=2, sort_keys=True)
        file.write("\n")


def register(user):
    _, nonce = call("GET", "/_synapse/admin/v1/register")
    nonce = nonce["nonce"]
    mac = hmac.new(secret, b"\0".join([nonce.encode(), user.encode(), b"secret-" + user.encode(), b"notadmin"]), hashlib.sha1).hexdigest()
    status, answer = call("POST", "/_synapse/admin/v1/register", {"nonce": nonce, "username": user, "password": "secret-" + user, "admin": False, "mac": mac})
    assert status == 200, answer
    return answer["access_token"], answer["user_id"]


stamp = str(int(time.time()))
alice_token, alice = register("alice" + stamp)
agent_token, agent = register("agent" + stamp)

status, login = call("POST", "/_matrix/client/v3/login", {"type": "m.login.password", "identifier": {"type": "m.id.user", "user": alice}, "password": "secret-alice" + stamp, "device_id": "SWITCHBOARD"})
save("login.json", login)
alice_token = login["access_token"]
save("login-forbidden.json", call("POST", "/_matrix/client/v3/login", {"type": "m.login.password", "identifier": {"type": "m.id.user", "user": alice}, "password": "wrong"})[1])
save("unknown-token.json", call("GET", "/_matrix/client/v3/account/whoami", token="not-a-token")[1])

_, room = call("POST", "/_matrix/client/v3/createRoom", {"name": "Support", "topic": "Orders", "preset": "private_chat", "invite": [alice]}, token=agent_token)
room = room["room_id"]
call("POST", "/_matrix/client/v3/join/" + urllib.parse.quote(room), {}, token=alice_token)
call("PUT", f"/_matrix/client/v3/rooms/{urllib.parse.quote(room)}/send/m.room.message/a1", {"msgtype": "m.text", "body": "Hello, how can I help?"}, token=agent_token)

timeline_filter = json.dumps({"room": {"timeline": {"limit": 10}}})
_, initial = call("GET", "/_matrix/client/v3/sync", token=alice_token, query={"filter": timeline_filter, "timeout": "0"})
save("sync-initial.json", initial)

call("PUT", f"/_matrix/client/v3/rooms/{urllib.parse.quote(room)}/send/m.room.message/txn-42", {"msgtype": "m.text", "body": "Where is my order?"}, token=alice_token)
_, sent = call("PUT", f"/_matrix/client/v3/rooms/{urllib.parse.quote(room)}/send/m.room.message/a2", {"msgtype": "m.notice", "body": "An agent will answer shortly"}, token=agent_token)
call("PUT", f"/_matrix/client/v3/rooms/{urllib.parse.quote(room)}/send/m.room.message/a3", {"msgtype": "m.text", "body": "* An agent answers now", "m.new_content": {"msgtype": "m.text", "body": "An agent answers now"}, "m.relates_to": {"rel_type": "m.replace", "event_id": sent["event_id"]}}, token=agent_token)
_, doomed = call("PUT", f"/_matrix/client/v3/rooms/{urllib.parse.quote(room)}/send/m.room.message/a4", {"msgtype": "m.text", "body": "typo"}, token=agent_token)
call("PUT", f"/_matrix/client/v3/rooms/{urllib.parse.quote(room)}/redact/{urllib.parse.quote(doomed['event_id'])}/r1", {"reason": "typo"}, token=agent_token)
call("PUT", f"/_matrix/client/v3/rooms/{urllib.parse.quote(room)}/typing/{urllib.parse.quote(agent)}", {"typing": True, "timeout": 30000}, token=agent_token)
call("POST", f"/_matrix/client/v3/rooms/{urllib.parse.quote(room)}/receipt/m.read/{urllib.parse.quote(sent['event_id'])}", {}, token=agent_token)
call("PUT", f"/_matrix/client/v3/rooms/{urllib.parse.quote(room)}/state/m.room.topic", {"topic": "Order 1234"}, token=agent_token)
_, incremental = call("GET", "/_matrix/client/v3/sync", token=alice_token, query={"filter": timeline_filter, "timeout": "0", "since": initial["next_batch"]})
save("sync-incremental.json", incremental)

for index in range(25):
    call("PUT", f"/_matrix/client/v3/rooms/{urllib.parse.quote(room)}/send/m.room.message/b{index}", {"msgtype": "m.text", "body": f"burst {index}"}, token=agent_token)
_, limited = call("GET", "/_matrix/client/v3/sync", token=alice_token, query={"filter": timeline_filter, "timeout": "0", "since": incremental["next_batch"]})
save("sync-limited.json", limited)
prev = limited["rooms"]["join"][room]["timeline"]["prev_batch"]
_, page = call("GET", f"/_matrix/client/v3/rooms/{urllib.parse.quote(room)}/messages", token=alice_token, query={"dir": "b", "from": prev, "limit": "10"})
save("messages-page.json", page)
save("forbidden.json", call("PUT", f"/_matrix/client/v3/rooms/{urllib.parse.quote('!nope:localhost')}/send/m.room.message/x", {"msgtype": "m.text", "body": "x"}, token=alice_token)[1])
print("recorded into", out)
