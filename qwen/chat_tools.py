"""Tools in the Qwen3.5 chat format: the tool list in the system message and the model's calls in its replies.

The system message opens with the functions the model may call, one JSON schema a line inside <tools>…</tools>,
and the format it must answer in. A reply's calls are XML-like blocks, one <parameter=…> per argument: text as it
is, lists and dicts as JSON. The model reads what a tool returned in a `tool` message (qwen/chat.py). Byte for byte
the published template's wording.
"""
import json

from qwen.lang import tr

TOOLS_INTRO = "# Tools\n\nYou have access to the following functions:\n\n<tools>"
TOOLS_FORMAT = """</tools>

If you choose to call a function ONLY reply in the following format with NO suffix:

<tool_call>
<function=example_function_name>
<parameter=example_parameter_1>
value_1
</parameter>
<parameter=example_parameter_2>
This is the value for the second parameter
that can span
multiple lines
</parameter>
</function>
</tool_call>

<IMPORTANT>
Reminder:
- Function calls MUST follow the specified format: an inner <function=...></function> block must be nested within \
<tool_call></tool_call> XML tags
- Required parameters MUST be specified
- You may provide optional reasoning for your function call in natural language BEFORE the function call, but NOT \
after
- If there is no function call available, answer the question like normal with your current knowledge and do not \
tell the user about function calls
</IMPORTANT>"""


def tools_system_text(tools):
    """The system message's tool section: each schema as JSON (json.dumps) on a line of its own, then the format."""
    return TOOLS_INTRO + "".join("\n" + json.dumps(tool, ensure_ascii=False) for tool in tools) + "\n" + TOOLS_FORMAT


def tool_calls_text(calls, answer, i):
    """The reply's tool calls, each in its <tool_call> block: after a blank line if the reply also says something."""
    if not calls:
        return ""
    if not isinstance(calls, (list, tuple)):
        raise ValueError(tr(f"message {i}: tool_calls must be a list of calls, got {type(calls).__name__}",
                            f"第 {i} 条消息：tool_calls 必须是由调用组成的列表，收到的是 {type(calls).__name__}"))
    return ("\n\n" if answer.strip() else "") + "\n".join(tool_call_text(call, i) for call in calls)


def tool_call_text(call, i):
    """One call, {"name": ..., "arguments": {...}} or OpenAI's {"function": {...}}, as the model writes it."""
    call = call.get("function", call) if isinstance(call, dict) else call
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        raise ValueError(tr(f"message {i}: a tool call must be a dict with a 'name' (and 'arguments'), got "
                            f"{repr(call)[:80]}",
                            f"第 {i} 条消息：工具调用必须是带 'name'（以及 'arguments'）的字典，收到的是 "
                            f"{repr(call)[:80]}"))
    arguments = call.get("arguments", {})
    if not isinstance(arguments, dict):
        raise ValueError(tr(f"message {i}: tool call {call['name']!r} has arguments of type "
                            f"{type(arguments).__name__}; the template needs a dict (json.loads a JSON string first)",
                            f"第 {i} 条消息：工具调用 {call['name']!r} 的 arguments 类型是 {type(arguments).__name__}，"
                            "而模板需要字典（JSON 字符串请先用 json.loads 转换）"))
    text = f"<tool_call>\n<function={call['name']}>\n"
    for name, value in arguments.items():
        value = json.dumps(value, ensure_ascii=False) if isinstance(value, (dict, list, tuple)) else str(value)
        text += f"<parameter={name}>\n{value}\n</parameter>\n"
    return text + "</function>\n</tool_call>"
