"""Calls an OpenAI-compatible or Anthropic endpoint with the official Python SDK and prints, as one JSON
line, the usage the SDK parsed. Usage: sdk_client.py BASE_URL API STREAM [PROMPT [HEADERS [MODEL]]], API in
chat, completions, responses, messages; STREAM in true/false; PROMPT the user message (a fixed question when
absent); HEADERS a JSON object of extra request headers (e.g. llm-d's x-prefiller-host-port); MODEL the
model to ask for (the simulated workers' when absent). Any SDK error exits non-zero with the error on stderr."""
import json
import sys

base_url, api, stream = sys.argv[1], sys.argv[2], sys.argv[3] == "true"
PROMPT = sys.argv[4] if len(sys.argv) > 4 else "What is the capital of France?"
HEADERS = json.loads(sys.argv[5]) if len(sys.argv) > 5 else None
MODEL = sys.argv[6] if len(sys.argv) > 6 else "meta-llama/Llama-3.1-8B-Instruct"


def openai_usage():
    import openai
    client = openai.OpenAI(base_url=base_url + "/v1", api_key="e2e", max_retries=0, timeout=30, default_headers=HEADERS)
    if api == "chat":
        kwargs = dict(model=MODEL, messages=[{"role": "user", "content": PROMPT}], max_tokens=16)
        if not stream:
            return client.chat.completions.create(**kwargs).usage
        usage = None
        for chunk in client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kwargs):
            usage = chunk.usage or usage
        return usage
    if api == "completions":
        kwargs = dict(model=MODEL, prompt=PROMPT, max_tokens=16)
        if not stream:
            return client.completions.create(**kwargs).usage
        usage = None
        for chunk in client.completions.create(stream=True, stream_options={"include_usage": True}, **kwargs):
            usage = chunk.usage or usage
        return usage
    if api == "responses":
        if not stream:
            return client.responses.create(model=MODEL, input=PROMPT).usage
        usage = None
        for event in client.responses.create(model=MODEL, input=PROMPT, stream=True):
            if event.type == "response.completed":
                usage = event.response.usage
        return usage
    raise SystemExit("unknown api " + api)


def anthropic_usage():
    import anthropic
    client = anthropic.Anthropic(base_url=base_url, api_key="e2e", max_retries=0, timeout=30, default_headers=HEADERS)
    kwargs = dict(model=MODEL, max_tokens=16, messages=[{"role": "user", "content": PROMPT}])
    if not stream:
        return client.messages.create(**kwargs).usage
    with client.messages.stream(**kwargs) as events:
        return events.get_final_message().usage


usage = anthropic_usage() if api == "messages" else openai_usage()
print(json.dumps(usage.model_dump(exclude_none=True)))
