# Execution export (run-configs/execution.json) -> the job matrix list, one entry per device and shard
# that holds run configs (a suite with fewer cases than shards takes no runner for an empty shard):
#   [{device_name, host_environment, architecture, shard: {index, count}, runs_on}]
# $labels (required: `jq --argjson labels '{}'`, or `args={"labels": {}}` in the jq Python package)
# is the project's runner-labels table, device name -> labels (`benchtrail runner-labels`);
# runs_on is its entry for the device, else [self-hosted, <architecture>, <device name>]
# (benchtrail.github.runner_labels.default_labels, the same rule).
# Used by the workflows through the jq CLI and by the tests through the jq Python package.
[
  .devices
  | to_entries[]
  | .key as $device
  | .value as $entry
  | $entry.shards[]
  | select(.run_configs.root_obj | length > 0)
  | {device_name: $device, host_environment: $entry.host_environment, architecture: $entry.architecture,
     shard: {index: .index, count: .count},
     runs_on: ($labels[$device] // ["self-hosted", $entry.architecture, $device])}
]
