"""flows: Prefect flows and tasks only; every step calls a stage package or the corpusflow engine."""

from common import lifeline

# Prefect starts its ephemeral API server (when no PREFECT_API_URL is set) with a copy of
# this process's environment before a flow's body runs, and never stops it if this
# process is SIGKILLed: the tag makes this process's reaper kill it.
lifeline.tag_descendants()
