#!/bin/sh
# The client the MCP conformance suite (@modelcontextprotocol/conformance)
# drives, as `passepartout mcp probe`: the suite runs this with the server's
# URL appended and the scenario in MCP_CONFORMANCE_SCENARIO, and judges what
# the server saw.
#
#   mcp_conformance_client.sh PASSEPARTOUT URL
#
# Each scenario maps to the probe that does what its server expects
# (conformance's dist/index.js): initialize only; tools_call calls
# add_numbers; sse-retry calls test_reconnection, whose stream the server
# closes to see the client resume it.
set -eu
passepartout=$1
url=$2
case "${MCP_CONFORMANCE_SCENARIO:-}" in
  initialize) exec "$passepartout" mcp probe "$url" --quiet --timeout 20 ;;
  tools_call) exec "$passepartout" mcp probe "$url" --quiet --timeout 20 --call add_numbers '{"a":5,"b":3}' ;;
  sse-retry) exec "$passepartout" mcp probe "$url" --quiet --timeout 20 --call test_reconnection '{}' ;;
  *)
    echo "mcp_conformance_client.sh: no probe for scenario '${MCP_CONFORMANCE_SCENARIO:-}'" >&2
    exit 2
    ;;
esac
