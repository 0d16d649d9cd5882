"""Drop-in SCP components for the pipelines users already run: a LangChain document compressor
(:mod:`scp.integrations.langchain`, extra ``langchain``) and a LlamaIndex node postprocessor
(:mod:`scp.integrations.llama_index`, extra ``llamaindex``), both over :mod:`scp.integrations.documents`.
Each framework is imported only by its own module."""
