"""`gpufed agent`: run the member agent for one cluster until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from controlplane.gcpolicy import collector_tuned
from controlplane.loopwatch import watching_the_loop
from gpufed.commands.running import (
    add_collector_arguments,
    add_loop_stall_argument,
    collector_policy,
    first_problem,
    given_flags,
)
from gpufed.logging_setup import LEVELS, configure_logging


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from member_agent.config import add_arguments as agent_arguments

    agent_arguments(parser)
    parser.add_argument("--log-level", default="INFO", choices=LEVELS)
    add_loop_stall_argument(parser, loop="agent's")
    add_collector_arguments(parser)


def run(args: argparse.Namespace) -> int:
    configure_logging(args.log_level, component=f"agent[{args.cluster_name}]")
    from pydantic import ValidationError

    from member_agent.agent import Agent
    from member_agent.config import config_from_args

    try:
        config = config_from_args(args)
    except ValidationError as exc:
        print(f"error: {first_problem(exc, given_flags(args))}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    async def main() -> None:
        agent = Agent(config)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, agent.request_stop)
        async with collector_tuned(collector_policy(args)), watching_the_loop(args.loop_stall_warning):
            await agent.run()

    try:
        asyncio.run(main())
    except Exception as exc:  # a fatal condition the agent explains (bad CA hash, refused token)
        logging.getLogger("gpufed.agent").debug("agent stopped", exc_info=True)
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0
