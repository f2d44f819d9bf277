"""`kbench mcp`: kbench's tools for agent harnesses over the Model Context Protocol (needs the `mcp` extra).

tools.py does the work on the Evaluator (api/), reference.py on the problem's reference (analysis/:
fusion groups, roofline, eager profile), public.py decides what a tool's answer may show, server.py
registers the tools on the SDK's server and runs a transport.
"""

from kbench.mcp.tools import Budget, ToolRefusal, Workbench

__all__ = ["Budget", "ToolRefusal", "Workbench"]
