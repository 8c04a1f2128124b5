"""botbuilder-dialogs 4.17's QnAMakerDialog against a live openqna, driven by botbuilder's TestAdapter as a bot's
adapter drives it (run from .venv-botbuilder).

Usage: botbuilder_dialog.py URL KB_ID KEY THRESHOLD CONVERSATION... — each CONVERSATION is a JSON list of what the user
says (or clicks: a card's button sends its text), in a conversation of its own.  Prints one JSON list per
conversation: for each turn, the bot's replies as {"text", "buttons"}.
"""

import asyncio
import json
import sys

from botbuilder.ai.qna.dialogs import QnAMakerDialog
from botbuilder.core import ConversationState, MemoryStorage, TurnContext
from botbuilder.core.adapters import TestAdapter
from botbuilder.dialogs import DialogSet, DialogTurnStatus


def shown(activity) -> dict:
    buttons = [b.title for a in (activity.attachments or []) for b in (a.content.buttons or [])]
    return {"text": activity.text, "buttons": buttons}


async def converse(url: str, kb_id: str, key: str, threshold: float, said: list[str]) -> list[list[dict]]:
    state = ConversationState(MemoryStorage())
    dialogs = DialogSet(state.create_property("DialogState"))
    dialogs.add(QnAMakerDialog(kb_id, key, f"{url}/qnamaker", threshold=threshold))

    async def on_turn(turn_context: TurnContext) -> None:
        dc = await dialogs.create_context(turn_context)
        result = await dc.continue_dialog()
        if result.status == DialogTurnStatus.Empty:
            await dc.begin_dialog("QnAMakerDialog")
        await state.save_changes(turn_context)

    adapter = TestAdapter(on_turn)
    turns = []
    for text in said:
        await adapter.receive_activity(text)
        replies = []
        while adapter.activity_buffer:
            replies.append(shown(adapter.activity_buffer.pop(0)))
        turns.append(replies)
    return turns


async def main(url: str, kb_id: str, key: str, threshold: str, *conversations: str) -> list:
    return [await converse(url, kb_id, key, float(threshold), json.loads(c)) for c in conversations]


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(*sys.argv[1:]))))
