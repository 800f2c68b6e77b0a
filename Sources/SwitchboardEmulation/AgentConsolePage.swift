import Foundation

/// The agent console's page, one for every emulator: plain HTML, a script and a style sheet
/// served by the emulator itself (no framework, nothing fetched from elsewhere: it works
/// offline). The page draws what the desk's state frames say and sends the agent's commands on
/// its WebSocket (``AgentWebConsole``).
enum AgentConsolePage {
    /// The largest file the page sends.
    static let maxFile = 10 << 20

    static func html(vendor: String) -> String {
        let vendor = escaped(vendor)
        return """
            <!doctype html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <title>Agent console · \(vendor) emulator</title>
            <link rel="stylesheet" href="/agent/console.css">
            <script src="/agent/console.js" defer></script>
            </head>
            <body>
            <header>
              <h1>Agent console <span class="vendor">\(vendor) emulator</span></h1>
              <p id="connection" role="status">connecting…</p>
              <p id="availability"></p>
            </header>
            <main>
              <nav aria-labelledby="conversations-title">
                <h2 id="conversations-title">Conversations</h2>
                <ul id="conversations"><li class="empty">None yet: connect an app and write.</li></ul>
              </nav>
              <section aria-labelledby="chat-title">
                <h2 id="chat-title">No conversation selected</h2>
                <p id="chat-meta"></p>
                <div class="buttons" role="group" aria-label="Agent">
                  <button type="button" id="accept" data-command="accept">Accept</button>
                  <button type="button" id="typing" data-command="typing">Typing</button>
                  <button type="button" id="read" data-command="read">Mark read</button>
                  <button type="button" id="transfer" data-command="transfer">Transfer</button>
                  <button type="button" id="close" data-command="close">Close</button>
                  <button type="button" id="offline" data-command="offline">Agents offline</button>
                </div>
                <div class="buttons" role="group" aria-label="Vendor moves" id="moves"></div>
                <ol id="messages" aria-label="Messages"></ol>
                <p id="announce" class="visually-hidden" aria-live="polite"></p>
                <p id="customer-typing" aria-live="polite"></p>
                <form id="compose">
                  <label for="text">Message</label>
                  <textarea id="text" rows="2" placeholder="Type, Enter sends (Shift+Enter: a new line)"></textarea>
                  <button type="submit" id="send" data-command="say">Send</button>
                </form>
                <form id="attach">
                  <label for="file">File</label>
                  <input type="file" id="file">
                  <button type="submit" id="send-file" data-command="file">Send file</button>
                </form>
                <p id="result" role="status"></p>
              </section>
              <aside aria-labelledby="faults-title">
                <h2 id="faults-title">Faults</h2>
                <div class="buttons">
                  <button type="button" id="disconnect" data-command="disconnect">Drop the connection</button>
                  <button type="button" id="reinit" data-command="reinit">Re-init</button>
                </div>
                <div class="field">
                  <label for="count">Next N events</label>
                  <input id="count" type="number" min="1" max="1000" value="1">
                  <button type="button" id="drop" data-command="drop">Drop</button>
                  <button type="button" id="duplicate" data-command="duplicate">Duplicate</button>
                </div>
                <div class="field">
                  <label for="ms">Delay (ms)</label>
                  <input id="ms" type="number" min="1" max="600000" value="2000">
                  <button type="button" id="delay" data-command="delay">Delay</button>
                </div>
                <h2 id="log-title">Log</h2>
                <ol id="log" aria-labelledby="log-title"></ol>
                <h2 id="faults-taken-title">Faults that took effect</h2>
                <ol id="faults-taken" aria-labelledby="faults-taken-title"></ol>
              </aside>
            </main>
            </body>
            </html>

            """
    }

    static func escaped(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }

    static let script = #"""
        "use strict";
        (() => {
          const key = new URLSearchParams(location.search).get("key") || "";
          const $ = (id) => document.getElementById(id);
          let desk = null;
          let selected = null;
          let socket = null;
          let nextID = 1;
          let retries = 0;
          let typingSent = false;
          let announced = { conversation: null, count: 0 };
          const maxFile = \#(maxFile);

          function connect() {
            socket = new WebSocket(`ws://${location.host}/agent/ws?key=${encodeURIComponent(key)}`);
            socket.onopen = () => { retries = 0; $("connection").textContent = "connected"; };
            socket.onclose = () => {
              $("connection").textContent = "disconnected from the emulator: trying again…";
              setTimeout(connect, Math.min(5000, 250 * 2 ** retries++));
            };
            socket.onmessage = (message) => {
              const frame = JSON.parse(message.data);
              if (frame.type === "state") { desk = frame.desk; render(frame.log); }
              if (frame.type === "result") say(frame.line, frame.ok);
            };
          }

          function say(line, ok) {
            $("result").textContent = line;
            $("result").className = ok ? "ok" : "refused";
          }

          function send(command) {
            if (!socket || socket.readyState !== WebSocket.OPEN) return say("not connected to the emulator", false);
            // A command the vendor lacks stays focusable (its reason is on the button); pressed, it says why.
            const reason = desk && desk.notOffered[command.do];
            if (reason !== undefined) return say(reason, false);
            command.id = nextID++;
            if (selected) command.conversation = selected;
            socket.send(JSON.stringify(command));
          }

          function item(tag, text, className) {
            const element = document.createElement(tag);
            if (text !== undefined) element.textContent = text;
            if (className) element.className = className;
            return element;
          }

          function render(log) {
            const conversations = desk.conversations;
            if (!conversations.some((c) => c.id === selected)) {
              const current = conversations.find((c) => c.id === desk.current);
              select((current || conversations[0] || { id: null }).id);
            }
            // The list is drawn anew: the conversation that had the keyboard's focus keeps it.
            const focused = document.activeElement && document.activeElement.dataset ? document.activeElement.dataset.conversation : undefined;
            const list = $("conversations");
            list.replaceChildren();
            if (conversations.length === 0) list.append(item("li", "None yet: connect an app and write.", "empty"));
            for (const conversation of conversations) {
              const button = item("button", "", "conversation " + conversation.phase);
              button.type = "button";
              button.dataset.conversation = conversation.id;
              button.setAttribute("aria-pressed", String(conversation.id === selected));
              button.append(item("span", conversation.customer, "customer"), item("span", conversation.phase, "phase"));
              const unread = conversation.messages.filter((m) => m.author === "customer" && !m.read).length;
              if (unread > 0) button.append(item("span", `${unread} unread`, "unread"));
              button.onclick = () => { select(conversation.id); render(log); };
              const entry = item("li");
              entry.append(button);
              list.append(entry);
              if (conversation.id === focused) button.focus();
            }
            const conversation = conversations.find((c) => c.id === selected);
            $("chat-title").textContent = conversation ? `${conversation.customer}` : "No conversation selected";
            $("chat-meta").textContent = conversation
              ? `${conversation.phase}${conversation.agent ? ` · agent ${conversation.agent}` : " · no agent yet"}${conversation.agentTyping ? " · you are typing" : ""}`
              : "";
            const messages = $("messages");
            messages.replaceChildren();
            for (const message of conversation ? conversation.messages : []) {
              const entry = item("li", undefined, "message " + message.author);
              entry.dataset.messageId = message.id;
              entry.dataset.author = message.author;
              entry.dataset.read = String(message.read);
              entry.append(item("span", message.name || message.author, "author"));
              entry.append(item("span", message.text, "text"));
              if (message.file) entry.append(item("span", `file: ${message.file}`, "file"));
              if (message.author === "agent") entry.append(item("span", message.read ? "read" : "sent", message.read ? "marker read" : "marker"));
              messages.append(entry);
            }
            messages.scrollTop = messages.scrollHeight;
            // Screen readers hear each new message once, not the whole list redrawn.
            const shown = conversation ? conversation.messages : [];
            if (announced.conversation === selected && shown.length > announced.count) {
              const newest = shown[shown.length - 1];
              $("announce").textContent = `${newest.name || newest.author}: ${newest.file ? `file ${newest.file}` : newest.text}`;
            }
            announced = { conversation: selected, count: shown.length };
            $("customer-typing").textContent = conversation && conversation.customerTyping ? `${conversation.customer} is typing…` : "";
            $("availability").textContent = desk.agentsOnline === null || desk.agentsOnline === undefined ? "" : (desk.agentsOnline ? "agents online" : "agents offline");
            $("offline").textContent = desk.agentsOnline === false ? "Agents online" : "Agents offline";

            const moves = $("moves");
            moves.replaceChildren();
            for (const move of desk.moves) {
              const button = item("button", move.title);
              button.type = "button";
              button.dataset.move = move.id;
              button.onclick = () => send({ do: "move", move: move.id });
              moves.append(button);
            }
            for (const button of document.querySelectorAll("[data-command]")) {
              const reason = desk.notOffered[button.dataset.command];
              button.setAttribute("aria-disabled", String(reason !== undefined));
              button.title = reason || "";
            }
            const lines = $("log");
            lines.replaceChildren(...log.slice(-50).reverse().map((line) => item("li", line)));
            $("faults-taken").replaceChildren(...desk.faults.slice(-50).reverse().map((line) => item("li", line)));
          }

          function count(id) { return Number.parseInt($(id).value, 10); }

          /// Another conversation: the typing sent in the last one is done.
          function select(id) {
            if (id !== selected) typingSent = false;
            selected = id;
          }

          $("compose").addEventListener("submit", (event) => {
            event.preventDefault();
            const text = $("text").value.trim();
            if (text === "") return;
            send({ do: "say", text });
            $("text").value = "";
            typingSent = false;
          });
          $("text").addEventListener("keydown", (event) => {
            if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
              event.preventDefault();
              $("compose").requestSubmit();
            }
          });
          $("text").addEventListener("input", () => {
            if (!typingSent && $("text").value !== "" && !(desk && desk.notOffered.typing)) {
              typingSent = true;
              send({ do: "typing", on: true });
            }
          });
          $("attach").addEventListener("submit", (event) => {
            event.preventDefault();
            const file = $("file").files[0];
            if (!file) return say("choose a file first", false);
            if (file.size > maxFile) return say(`${file.name} is ${file.size} bytes: the console sends files up to ${maxFile}`, false);
            const reader = new FileReader();
            reader.onerror = () => say(`${file.name} could not be read`, false);
            reader.onload = () => {
              const data = String(reader.result).replace(/^data:[^,]*,/, "");
              send({ do: "file", name: file.name, type: file.type, data });
              $("file").value = "";
            };
            reader.readAsDataURL(file);
          });
          for (const name of ["accept", "read", "transfer", "close", "offline", "disconnect", "reinit"]) {
            $(name).addEventListener("click", () => send({ do: name }));
          }
          $("typing").addEventListener("click", () => send({ do: "typing" }));
          $("drop").addEventListener("click", () => send({ do: "drop", count: count("count") }));
          $("duplicate").addEventListener("click", () => send({ do: "duplicate", count: count("count") }));
          $("delay").addEventListener("click", () => send({ do: "delay", ms: count("ms") }));
          connect();
        })();

        """#

    static let style = """
        :root { font: 16px/1.4 system-ui, "Liberation Sans", sans-serif; color: #1b1b1b; background: #f6f6f4; }
        * { box-sizing: border-box; }
        body { margin: 0; }
        header { display: flex; flex-wrap: wrap; gap: 0 1.5rem; align-items: baseline; padding: 0.5rem 1rem; background: #20323f; color: #fff; }
        header h1 { font-size: 1.2rem; margin: 0; }
        header .vendor { font-weight: normal; opacity: 0.85; }
        header p { margin: 0; }
        main { display: grid; grid-template-columns: 16rem minmax(0, 1fr) 19rem; gap: 1rem; padding: 1rem; }
        nav, section, aside { background: #fff; border: 1px solid #d5d5d0; border-radius: 6px; padding: 0.75rem; min-width: 0; }
        h2 { font-size: 1rem; margin: 0 0 0.5rem; }
        ul, ol { list-style: none; margin: 0; padding: 0; }
        .conversation { display: flex; flex-wrap: wrap; gap: 0.25rem 0.5rem; width: 100%; text-align: left; margin-bottom: 0.25rem; }
        .conversation[aria-pressed="true"] { background: #dbe9f4; border-color: #20323f; }
        .phase { font-size: 0.85rem; color: #555; }
        .conversation.waiting .phase { color: #8a4b00; font-weight: bold; }
        .unread { font-size: 0.85rem; color: #0b5394; }
        #messages { height: clamp(10rem, 38vh, 22rem); overflow-y: auto; border: 1px solid #e2e2de; border-radius: 4px; padding: 0.5rem; margin-bottom: 0.5rem; }
        .message { display: flex; flex-wrap: wrap; gap: 0 0.5rem; margin: 0.25rem 0; padding: 0.25rem 0.5rem; border-radius: 4px; overflow-wrap: anywhere; }
        .message.customer { background: #eef3e8; }
        .message.agent { background: #e7eef6; margin-left: 2rem; }
        .message.system { color: #555; font-style: italic; }
        .message .author { font-weight: bold; }
        .message .text { flex-basis: 100%; white-space: pre-wrap; }
        .marker { font-size: 0.8rem; color: #666; }
        .marker.read { color: #0b6e2f; }
        form, .field { display: flex; flex-wrap: wrap; gap: 0.5rem; align-items: center; margin-bottom: 0.5rem; }
        label { font-weight: bold; }
        #compose label, #attach label { flex-basis: 100%; }
        textarea { flex: 1 1 16rem; font: inherit; padding: 0.4rem; }
        input[type=number] { width: 7rem; font: inherit; }
        .buttons { display: flex; flex-wrap: wrap; gap: 0.5rem; margin-bottom: 0.5rem; }
        button { font: inherit; padding: 0.35rem 0.7rem; border: 1px solid #8a8a85; border-radius: 4px; background: #fafaf8; cursor: pointer; }
        button[aria-disabled="true"] { opacity: 0.45; cursor: not-allowed; }
        .visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); white-space: nowrap; }
        button:focus-visible, textarea:focus-visible, input:focus-visible { outline: 3px solid #1a73e8; outline-offset: 1px; }
        #result.refused { color: #a40000; }
        #log, #faults-taken { font-size: 0.85rem; max-height: 14rem; overflow-y: auto; }
        #log li, #faults-taken li { border-bottom: 1px solid #eee; padding: 0.15rem 0; overflow-wrap: anywhere; }
        @media (max-width: 1100px) { main { grid-template-columns: 14rem minmax(0, 1fr); } aside { grid-column: 1 / -1; } }
        @media (max-width: 700px) { main { grid-template-columns: minmax(0, 1fr); padding: 0.5rem; } #messages { height: 16rem; } }

        """
}
