"""botbuilder-ai 4.17's QnAMaker against a live openqna, as a Python bot calls it (run from .venv-botbuilder).

Usage: botbuilder_qna.py URL KB_ID KEY — prints one JSON object of what the bot saw.
"""

import asyncio
import json
import sys

from botbuilder.ai.qna import QnAMaker, QnAMakerEndpoint, QnAMakerOptions
from botbuilder.ai.qna.models import FeedbackRecord, Metadata, QnARequestContext
from botbuilder.core import TurnContext
from botbuilder.core.adapters import TestAdapter
from botbuilder.schema import Activity, ActivityTypes, ChannelAccount, ConversationAccount


def turn(adapter: TestAdapter, text: str) -> TurnContext:
    activity = Activity(type=ActivityTypes.message, text=text, channel_id="test",
                        conversation=ConversationAccount(id="conversation"),
                        from_property=ChannelAccount(id="user"), recipient=ChannelAccount(id="bot"))
    return TurnContext(adapter, activity)


def seen(results) -> list[dict]:
    return [{"id": r.id, "score": r.score, "answer": r.answer, "source": r.source, "questions": r.questions,
             "metadata": {m.name: m.value for m in (r.metadata or [])},
             "prompts": [p.qna_id for p in (r.context.prompts if r.context else [])]} for r in results]


async def main(url: str, kb_id: str, key: str) -> dict:
    adapter = TestAdapter()
    qna = QnAMaker(QnAMakerEndpoint(knowledge_base_id=kb_id, endpoint_key=key, host=f"{url}/qnamaker"))
    out = {}
    try:
        out["plain"] = seen(await qna.get_answers(turn(adapter, "how long does it take to charge the battery?")))
        out["top3"] = seen(await qna.get_answers(turn(adapter, "password trouble, cannot log in"),
                                                 QnAMakerOptions(top=3, score_threshold=0.0001)))
        out["filtered_out"] = seen(await qna.get_answers(
            turn(adapter, "how long does it take to charge the battery?"),
            QnAMakerOptions(strict_filters=[Metadata(name="category", value="account")])))
        out["filtered_or"] = seen(await qna.get_answers(
            turn(adapter, "how long does it take to charge the battery?"),
            QnAMakerOptions(strict_filters=[Metadata(name="category", value="account"),
                                            Metadata(name="product", value="surface")],
                            strict_filters_join_operator="OR")))
        out["follow_up"] = seen(await qna.get_answers(
            turn(adapter, "Fast charging"),
            QnAMakerOptions(context=QnARequestContext(previous_qna_id=1, previous_user_query="charging time"))))
        out["by_id"] = seen(await qna.get_answers(turn(adapter, "Battery care"), QnAMakerOptions(qna_id=4)))
        out["test_index"] = seen(await qna.get_answers(turn(adapter, "what is the draft answer?"),
                                                       QnAMakerOptions(is_test=True)))
        await qna.call_train([FeedbackRecord(user_id="user", user_question="battery full after how long?", qna_id=1)])
        out["trained"] = True
    finally:
        await qna.close()
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(*sys.argv[1:4]))))
