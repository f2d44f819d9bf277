"""`kbench run --agent`: a tool-calling model works each problem with kbench's MCP tools, within budgets;
its one submit is judged by the trusted evaluator, and every message and tool call is kept with the run."""

from kbench.agent.loop import Ending, Limits, Seat, Session
from kbench.agent.run import run_agent

__all__ = ["Ending", "Limits", "Seat", "Session", "run_agent"]
