"""Provider requests made from a view: a context build or a model history as
the keyword arguments of OpenAI's ``chat.completions.create`` and
``responses.create`` and Anthropic's ``messages.create``
(docs/providers.md)."""

from .anthropic_messages import to_anthropic
from .openai_chat import to_openai_chat
from .openai_responses import to_openai_responses

__all__ = ["to_anthropic", "to_openai_chat", "to_openai_responses"]
