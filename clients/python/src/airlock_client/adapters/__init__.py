"""Framework adapters, each an optional extra of the package (docs/sdk.md, "Adapters"):

- `airlock_client.adapters.langchain` (`pip install 'airlock-ai[langchain]'`): a LangChain
  tool that runs Python in a sandbox kept across calls, and a toolkit adding the file tools.
- `airlock_client.adapters.openai_agents` (`pip install 'airlock-ai[openai-agents]'`): a
  sandbox client for the OpenAI Agents SDK, so a `SandboxAgent` runs on airlock.

Nothing here is imported by `airlock_client` itself; importing an adapter without its framework
raises ImportError naming the extra to install.
"""
