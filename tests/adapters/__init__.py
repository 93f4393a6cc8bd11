"""Tests of the framework adapters (OpenAI Agents SDK, LangGraph, eventsourcing),
their privacy behaviour included; the frameworks' own suites run from peers/."""
