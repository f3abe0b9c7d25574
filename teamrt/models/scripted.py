"""``ScriptedModel``: an in-process model that answers from a list of steps, for unit tests.

    model = ScriptedModel([Reply().call("Read", {"file_path": "a.txt"}), lambda req: Reply().say("done")])

A step is a ``Reply``, a ``ModelResponse``, an exception to raise, or a
function from the request to one of those. A ``ModelResponse`` step comes back
as it is: that is how a test scripts what the API reports beside the content
(``applied_edits``, ``input_transformations``, a ``compaction`` block with
``stop_reason="compaction"``, ``rate_limits``). Every request is checked as the
real provider checks it before a call (``request_params``: an ``effort`` the
model does not take raises ``EffortUnsupported``). The model fails loudly both ways:
a call with no step left raises ``ScriptError``, and so does ``aclose`` (or
``check_done``) while steps are left over.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterable

from teamrt.models.errors import ScriptError
from teamrt.models.params import request_params
from teamrt.models.reply import Reply
from teamrt.models.tokens import TokenCounter, output_tokens, request_tokens
from teamrt.models.types import Block, ModelRequest, ModelResponse, OnRestart, OnText, Usage

Step = Reply | ModelResponse | BaseException | Callable[[ModelRequest], "Reply | ModelResponse"]


_instances = itertools.count(1)


class ScriptedModel:
    def __init__(self, steps: Iterable[Step], *, name: str = "scripted") -> None:
        self.name = name
        self._instance = next(_instances)  # tool-call ids are unique across the models of one run
        self._steps: deque[Step] = deque(steps)
        self.requests: list[ModelRequest] = []
        self._ids = itertools.count(1)
        self._counter = TokenCounter()

    @property
    def remaining(self) -> int:
        return len(self._steps)

    async def complete(
        self, request: ModelRequest, *, on_text: OnText | None = None, on_restart: OnRestart | None = None
    ) -> ModelResponse:
        request_params(request)  # what the real provider refuses before calling, refused here too
        self.requests.append(request)
        if not self._steps:
            raise ScriptError(
                f"scripted model: no step left for call {len(self.requests)}"
                f" (agent {request.agent or '?'}; the script had {len(self.requests) - 1})"
            )
        step = self._steps.popleft()
        if isinstance(step, BaseException):
            raise step
        answer = step(request) if callable(step) else step
        response = answer if isinstance(answer, ModelResponse) else self._response(request, answer)
        if on_text is not None and response.text:
            on_text(response.text)
        return response

    def _response(self, request: ModelRequest, reply: Reply) -> ModelResponse:
        content: list[Block] = []
        for block in reply.content:
            block = dict(block)
            if block["type"] == "tool_use":
                block.setdefault("id", f"toolu_scripted_{self._instance}_{next(self._ids):04d}")
            elif block["type"] == "thinking":
                block.setdefault("signature", "scripted")
            content.append(block)
        usage = Usage(
            input_tokens=self._counter.count(request.tools, request.system, request.messages),
            output_tokens=output_tokens(content),
        )
        return ModelResponse(
            id=f"msg_scripted_{len(self.requests):04d}",
            model=request.model,
            content=content,
            stop_reason=reply.final_stop_reason(),
            usage=usage,
        )

    async def count_tokens(self, request: ModelRequest) -> int:
        return request_tokens(request_params(request))

    def check_done(self) -> None:
        if self._steps:
            raise ScriptError(
                f"scripted model: {len(self._steps)} step(s) left over after {len(self.requests)} calls"
            )

    async def aclose(self) -> None:
        self.check_done()


__all__ = ["ScriptedModel", "Step"]
