/// The gateway API's OpenAPI document, served at `/openapi.yaml` (no token needed) and kept
/// beside the routes it describes; `GatewayAPITests` checks that every route the gateway serves is
/// in it and every path in it is served.
///
/// Written by hand rather than generated: swift-openapi-generator cannot describe the WebSocket
/// stream, and a document beside hand-written handlers is what tools (schemathesis, client
/// generators) read either way.
enum GatewayOpenAPI {
    static let document = #"""
        openapi: 3.1.0
        info:
          title: Switchboard gateway API
          version: "1"
          description: |
            Any gateway of a fleet answers for every session of the fleet: reads come from the shared
            PostgreSQL store, sends and read markers reach the process that runs the session through
            the database, and the event stream reads what every process's bridge wrote.
            Every /v1 route needs `Authorization: Bearer <token>` (the gateway's --api-token-env).
            Any /v1 route may answer 503 (the database failed: try again) or 500, with the Error body.
        servers:
          - url: http://127.0.0.1:8090
        security:
          - bearer: []
        components:
          securitySchemes:
            bearer:
              type: http
              scheme: bearer
          parameters:
            backend:
              name: backend
              in: path
              required: true
              schema: { type: string }
              description: The session's backend as the sessions file names it (voximplant, webim, cxone, matrix).
            account:
              name: account
              in: path
              required: true
              schema: { type: string }
              description: The session's account (percent-encoded).
            conversation:
              name: conversation
              in: path
              required: true
              schema: { type: string }
          responses:
            error:
              description: The request was refused; the body says why.
              content:
                application/json:
                  schema: { $ref: "#/components/schemas/Error" }
          schemas:
            Error:
              type: object
              required: [error]
              properties:
                error:
                  type: object
                  required: [code, message]
                  properties:
                    code: { type: string, description: "A SwitchboardError code (authenticationFailed, invalidArgument, conversationNotFound, …)" }
                    message: { type: string }
            Participant:
              type: object
              required: [id, role]
              properties:
                id: { type: string }
                role: { type: string, enum: [customer, agent, bot, system, user] }
                displayName: { type: string }
                lastReadSequence: { type: integer }
            Conversation:
              type: object
              required: [id, kind, state, unreadCount, participants]
              properties:
                id: { type: string }
                kind: { type: string, enum: [supportChat, thread, direct, group] }
                title: { type: string }
                state: { type: string }
                unreadCount: { type: integer, description: Messages from others the user has not read. }
                lastSequence: { type: integer }
                participants: { type: array, items: { $ref: "#/components/schemas/Participant" } }
                agent: { $ref: "#/components/schemas/Participant" }
            Message:
              type: object
              required: [conversationId, kind, text, time, state]
              properties:
                serverId: { type: string, description: The server's id; absent while pending. }
                clientId: { type: string, description: The id the sender chose (the API caller's clientId for its sends). }
                conversationId: { type: string }
                sequence: { type: integer }
                sender: { type: string }
                senderRole: { type: string }
                senderName: { type: string }
                kind: { type: string }
                text: { type: string }
                time: { type: string, format: date-time }
                state: { type: string, enum: [pending, sent, delivered, read, failed] }
                error: { type: string, description: Why a failed message failed. }
                edited: { type: boolean }
                deleted: { type: boolean }
                attachments:
                  type: array
                  items:
                    type: object
                    properties:
                      name: { type: string }
                      mimeType: { type: string }
                      size: { type: integer }
                      url: { type: string }
                payload: { description: Vendor content the model does not cover. }
            Queued:
              type: object
              required: [clientId, state]
              properties:
                clientId: { type: string }
                state: { type: string, enum: [queued, refused] }
                error: { type: string }
            Event:
              type: object
              required: [id, type]
              description: |
                One frame of the event stream. `id` is where the event is in the fleet's log: reconnect
                with `after=<id>` of the last frame received to go on from there. `type` is `ready` (the
                first frame: the position the stream starts after), `position` (an idle stream's place in
                the log, every 10 s at most), `resync` (events after the stream's position were pruned
                before it read them: read state again; the stream goes on), or an event's kind, with its fields:
                connection (state, reason), conversationAdded / conversationUpdated (conversationInfo),
                conversationStateChanged (state, previous), conversationRemoved, participantsAdded /
                participantsUpdated (participants), participantsRemoved (participantIds), agentChanged
                (agent), messageAdded (message, position), messageUpdated (message), messageRemoved
                (messageId), historyCleared, typing (participant, isTyping, draft), readMarker (participant,
                marker: {sequence} | {messageId} | {time}), availability, queuePosition, settingsChanged
                (settings), custom (name, payload), error and fatal (error: {code, message}), gap (dropped:
                a process's bus dropped events for a slow subscriber).
              properties:
                id: { type: string }
                type: { type: string }
                session: { type: string }
                backend: { type: string }
                conversation: { type: string }
                time: { type: string, format: date-time }
                sequence: { type: integer }
              additionalProperties: true
        paths:
          /health:
            get:
              summary: The process answers (for a supervisor's liveness probe).
              security: []
              responses:
                "200": { description: "alive", content: { text/plain: {} } }
          /ready:
            get:
              summary: The gateway holds its lock connection and the database answers (503 otherwise, and while it stops).
              security: []
              responses:
                "200": { description: "ready: N sessions held", content: { text/plain: {} } }
                "503": { description: Not ready, and why., content: { text/plain: {} } }
          /metrics:
            get:
              summary: The gateway's metrics in Prometheus's text format.
              security: []
              responses:
                "200": { description: The samples., content: { text/plain: {} } }
          /openapi.yaml:
            get:
              summary: This document.
              security: []
              responses:
                "200": { description: The OpenAPI document, content: { application/yaml: {} } }
          /v1/sessions:
            get:
              summary: The fleet's sessions and the process that runs each now (null when none does).
              responses:
                "200":
                  description: The sessions.
                  content:
                    application/json:
                      schema:
                        type: object
                        properties:
                          sessions:
                            type: array
                            items:
                              type: object
                              required: [key, backend, account, process]
                              properties:
                                key: { type: string }
                                backend: { type: string }
                                account: { type: string }
                                process: { type: [string, "null"] }
                "401": { $ref: "#/components/responses/error" }
          /v1/sessions/{backend}/{account}/conversations:
            parameters: [{ $ref: "#/components/parameters/backend" }, { $ref: "#/components/parameters/account" }]
            get:
              summary: The session's conversations with their unread counts, as the shared store has them.
              responses:
                "200":
                  description: The conversations.
                  content:
                    application/json:
                      schema:
                        type: object
                        properties:
                          conversations: { type: array, items: { $ref: "#/components/schemas/Conversation" } }
                          unreadTotal: { type: integer }
                "401": { $ref: "#/components/responses/error" }
                "404": { $ref: "#/components/responses/error" }
          /v1/sessions/{backend}/{account}/conversations/{conversation}/messages:
            parameters:
              - { $ref: "#/components/parameters/backend" }
              - { $ref: "#/components/parameters/account" }
              - { $ref: "#/components/parameters/conversation" }
            get:
              summary: A page of the conversation's stored history, oldest first.
              parameters:
                - { name: limit, in: query, schema: { type: integer, minimum: 1, maximum: 500, default: 50 } }
                - { name: before, in: query, schema: { type: string }, description: "The `before` of the previous page: the next older page." }
              responses:
                "200":
                  description: The page; `before` is null when there is nothing older stored.
                  content:
                    application/json:
                      schema:
                        type: object
                        properties:
                          messages: { type: array, items: { $ref: "#/components/schemas/Message" } }
                          before: { type: [string, "null"] }
                "400": { $ref: "#/components/responses/error" }
                "401": { $ref: "#/components/responses/error" }
                "404": { $ref: "#/components/responses/error" }
            post:
              summary: Sends a message, once per clientId whatever the number of calls.
              description: |
                The message is queued for the process that runs the session (any gateway takes it). A
                repeat with the same clientId queues nothing: it answers with the stored message once the
                session has it, or says it is still queued.
              requestBody:
                required: true
                content:
                  application/json:
                    schema:
                      type: object
                      required: [clientId, text]
                      properties:
                        clientId: { type: string, minLength: 1, maxLength: 200 }
                        text: { type: string }
                        payload: { description: Vendor content sent with the message. }
              responses:
                "200":
                  description: The client id's message, already stored.
                  content: { application/json: { schema: { type: object, properties: { message: { $ref: "#/components/schemas/Message" } } } } }
                "202":
                  description: Queued for the session's process.
                  content: { application/json: { schema: { $ref: "#/components/schemas/Queued" } } }
                "400": { $ref: "#/components/responses/error" }
                "401": { $ref: "#/components/responses/error" }
                "404": { $ref: "#/components/responses/error" }
                "409":
                  description: The clientId is a message of another conversation of the session.
                  content: { application/json: { schema: { $ref: "#/components/schemas/Error" } } }
                "413": { $ref: "#/components/responses/error" }
                "422":
                  description: The session refused the message for good (too long, unsupported).
                  content: { application/json: { schema: { $ref: "#/components/schemas/Queued" } } }
          /v1/sessions/{backend}/{account}/messages/{clientId}:
            parameters:
              - { $ref: "#/components/parameters/backend" }
              - { $ref: "#/components/parameters/account" }
              - { name: clientId, in: path, required: true, schema: { type: string } }
            get:
              summary: What became of a send.
              responses:
                "200":
                  description: The stored message, or the refusal.
                  content:
                    application/json:
                      schema:
                        oneOf:
                          - { type: object, properties: { message: { $ref: "#/components/schemas/Message" } } }
                          - { $ref: "#/components/schemas/Queued" }
                "202":
                  description: Still queued.
                  content: { application/json: { schema: { $ref: "#/components/schemas/Queued" } } }
                "401": { $ref: "#/components/responses/error" }
                "404": { $ref: "#/components/responses/error" }
          /v1/sessions/{backend}/{account}/conversations/{conversation}/read:
            parameters:
              - { $ref: "#/components/parameters/backend" }
              - { $ref: "#/components/parameters/account" }
              - { $ref: "#/components/parameters/conversation" }
            post:
              summary: Marks the conversation read, up to a message or to the newest.
              requestBody:
                content:
                  application/json:
                    schema:
                      type: object
                      properties:
                        upTo: { type: string, description: A message's server id; the newest when absent. }
              responses:
                "202":
                  description: Queued for the session's process.
                  content: { application/json: { schema: { type: object, properties: { state: { type: string } } } } }
                "400": { $ref: "#/components/responses/error" }
                "401": { $ref: "#/components/responses/error" }
                "404": { $ref: "#/components/responses/error" }
          /v1/events:
            get:
              summary: A WebSocket of the fleet's normalized events, resumable by event id.
              description: |
                Upgrade to a WebSocket. The server writes one JSON text frame per event (schema Event),
                first a `ready` frame. Filter with `session` and `conversation`; resume with `after`, the
                `id` of the last frame received. Without the token or with bad parameters the socket is
                closed at once with a close code and the reason: 4401 (no or a wrong token), 4400 (a bad
                parameter), 4404 (no such session). A GET that is not an upgrade is answered 400 (401
                without the token).
              parameters:
                - { name: session, in: query, schema: { type: string }, description: "A session's key: backend/account." }
                - { name: conversation, in: query, schema: { type: string } }
                - { name: after, in: query, schema: { type: string }, description: An event id. }
              responses:
                "101": { description: Switching to the WebSocket. }
                "400": { $ref: "#/components/responses/error" }
                "401": { $ref: "#/components/responses/error" }
                "404": { $ref: "#/components/responses/error" }
        """#
}
