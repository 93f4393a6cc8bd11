"""eventsourcing on trajlog: an event-sourced chat whose replies come from a
scripted model (no network), stored by trajlog's recorders, then the
trajectory view of what was recorded.

    python examples/eventsourcing_example.py [store.db]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from uuid import UUID

from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event

import trajlog
from trajlog.adapters.eventsourcing import TrajlogAggregateRecorder
from trajlog.projections import trajectory

SCRIPT = ["Hello! How can I help?", "2 + 2 = 4.", "Goodbye."]  # the scripted model


class Chat(Aggregate):
    def __init__(self, title: str) -> None:
        self.title, self.turns = title, []

    @event("Asked")
    def ask(self, question: str, answer: str) -> None:
        self.turns.append((question, answer))


class Chats(Application[UUID]):
    def start(self, title: str) -> UUID:
        chat = Chat(title)
        self.save(chat)
        return chat.id

    def ask(self, chat_id: UUID, question: str) -> str:
        chat: Chat = self.repository.get(chat_id)
        answer = SCRIPT[len(chat.turns) % len(SCRIPT)]
        chat.ask(question, answer)
        self.save(chat)
        return answer


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else str(Path(tempfile.mkdtemp()) / "es.db")
    app = Chats(env={"PERSISTENCE_MODULE": "trajlog.adapters.eventsourcing",
                     "TRAJLOG_DBNAME": path})
    chat_id = app.start("demo")
    for q in ("hi", "what is 2 + 2?", "bye"):
        print(f"user: {q}\nmodel: {app.ask(chat_id, q)}")
    print("notifications:", [n.id for n in app.recorder.select_notifications(None, 10)])
    app.close()

    with trajlog.open(path) as store:  # the aggregate is a trajlog session
        session = store.session(TrajlogAggregateRecorder(store).session_id_of(chat_id))
        # its events are domain events, not agent turns: the trajectory view
        # has no turn to show, the log is the view
        print("turns in the trajectory view:", len(trajectory(session)))
        for ev in session.events():
            print(ev.seq, ev.type, ev.data["v"], ev.data["topic"], ev.data["state"][:60])
        print(f"explore: python -m trajlog --db {path} tail {session.id}")

if __name__ == "__main__":
    main()
