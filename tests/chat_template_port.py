"""The official Qwen3.5-0.8B/2B chat template (qwen3_5_0.8b_2b.jinja: tests/helpers.py TEMPLATES) ported to
Python line by line, each jinja statement as the Python one beside it: a learner's template-faithful answer to
exercise 215, which the judge must accept (tests/test_chat.py). `thinking` is the template's `enable_thinking`."""
import json


def render(messages: list[dict], add_generation_prompt: bool = True, thinking: bool = False, tools=None,
           add_vision_id=False) -> str:
    enable_thinking = thinking
    out = []
    image_count, video_count = 0, 0

    def render_content(content, do_vision_count, is_system_content=False):
        nonlocal image_count, video_count
        text = ""
        if isinstance(content, str):  # {%- if content is string %}
            text += content
        elif isinstance(content, (list, tuple)):  # {%- elif content is iterable and content is not mapping %}
            for item in content:
                if "image" in item or "image_url" in item or item.get("type") == "image":
                    if is_system_content:
                        raise ValueError("System message cannot contain images.")
                    if do_vision_count:
                        image_count += 1
                    if add_vision_id:
                        text += "Picture " + str(image_count) + ": "
                    text += "<|vision_start|><|image_pad|><|vision_end|>"
                elif "video" in item or item.get("type") == "video":
                    if is_system_content:
                        raise ValueError("System message cannot contain videos.")
                    if do_vision_count:
                        video_count += 1
                    if add_vision_id:
                        text += "Video " + str(video_count) + ": "
                    text += "<|vision_start|><|video_pad|><|vision_end|>"
                elif "text" in item:
                    text += str(item["text"])
                else:
                    raise ValueError("Unexpected item type in content.")
        elif content is None:  # {%- elif content is none or content is undefined %}
            text += ""
        else:
            raise ValueError("Unexpected content type.")
        return text

    if not messages:
        raise ValueError("No messages provided.")
    if tools and isinstance(tools, (list, tuple)):
        out.append("<|im_start|>system\n")
        out.append("# Tools\n\nYou have access to the following functions:\n\n<tools>")
        for tool in tools:
            out.append("\n")
            out.append(json.dumps(tool, ensure_ascii=False))
        out.append("\n</tools>")
        out.append("\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
                   "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n"
                   "</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second parameter\n"
                   "that can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\n"
                   "Reminder:\n- Function calls MUST follow the specified format: an inner <function=...></function>"
                   " block must be nested within <tool_call></tool_call> XML tags\n- Required parameters MUST be "
                   "specified\n- You may provide optional reasoning for your function call in natural language "
                   "BEFORE the function call, but NOT after\n- If there is no function call available, answer the "
                   "question like normal with your current knowledge and do not tell the user about function "
                   "calls\n</IMPORTANT>")
        if messages[0].get("role") == "system":
            content = render_content(messages[0].get("content"), False, True).strip()
            if content:
                out.append("\n\n" + content)
        out.append("<|im_end|>\n")
    else:
        if messages[0].get("role") == "system":
            content = render_content(messages[0].get("content"), False, True).strip()
            out.append("<|im_start|>system\n" + content + "<|im_end|>\n")
    multi_step_tool, last_query_index = True, len(messages) - 1
    for index in range(len(messages) - 1, -1, -1):  # {%- for message in messages[::-1] %}
        message = messages[index]
        if multi_step_tool and message.get("role") == "user":
            content = render_content(message.get("content"), False).strip()
            if not (content.startswith("<tool_response>") and content.endswith("</tool_response>")):
                multi_step_tool = False
                last_query_index = index
    if multi_step_tool:
        raise ValueError("No user query found in messages.")
    for i, message in enumerate(messages):
        content = render_content(message.get("content"), True).strip()
        role = message.get("role")
        if role == "system":
            if i != 0:
                raise ValueError("System message must be at the beginning.")
        elif role == "user":
            out.append("<|im_start|>" + role + "\n" + content + "<|im_end|>" + "\n")
        elif role == "assistant":
            reasoning_content = ""
            if isinstance(message.get("reasoning_content"), str):
                reasoning_content = message["reasoning_content"]
            else:
                if "</think>" in content:
                    reasoning_content = content.split("</think>")[0].rstrip("\n").split("<think>")[-1].lstrip("\n")
                    content = content.split("</think>")[-1].lstrip("\n")
            reasoning_content = reasoning_content.strip()
            if i > last_query_index:
                out.append("<|im_start|>" + role + "\n<think>\n" + reasoning_content + "\n</think>\n\n" + content)
            else:
                out.append("<|im_start|>" + role + "\n" + content)
            tool_calls = message.get("tool_calls")
            if tool_calls and isinstance(tool_calls, (list, tuple)):
                for k, tool_call in enumerate(tool_calls):
                    if "function" in tool_call:
                        tool_call = tool_call["function"]
                    if k == 0:
                        if content.strip():
                            out.append("\n\n<tool_call>\n<function=" + tool_call["name"] + ">\n")
                        else:
                            out.append("<tool_call>\n<function=" + tool_call["name"] + ">\n")
                    else:
                        out.append("\n<tool_call>\n<function=" + tool_call["name"] + ">\n")
                    if "arguments" in tool_call:
                        for args_name, args_value in tool_call["arguments"].items():
                            out.append("<parameter=" + args_name + ">\n")
                            if isinstance(args_value, (dict, list, tuple)):
                                args_value = json.dumps(args_value, ensure_ascii=False)
                            else:
                                args_value = str(args_value)
                            out.append(args_value)
                            out.append("\n</parameter>\n")
                    out.append("</function>\n</tool_call>")
            out.append("<|im_end|>\n")
        elif role == "tool":
            if i > 0 and messages[i - 1].get("role") != "tool":  # loop.previtem
                out.append("<|im_start|>user")
            out.append("\n<tool_response>\n")
            out.append(content)
            out.append("\n</tool_response>")
            if i != len(messages) - 1 and messages[i + 1].get("role") != "tool":
                out.append("<|im_end|>\n")
            elif i == len(messages) - 1:
                out.append("<|im_end|>\n")
        else:
            raise ValueError("Unexpected message role.")
    if add_generation_prompt:
        out.append("<|im_start|>assistant\n")
        if enable_thinking is True:  # 0.8B/2B: {%- if enable_thinking is defined and enable_thinking is true %}
            out.append("<think>\n")
        else:
            out.append("<think>\n\n</think>\n\n")
    return "".join(out)
