# Execution export (run-configs/execution.json) -> the job matrix list:
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
  | {device_name: $device, host_environment: $entry.host_environment, architecture: $entry.architecture,
     shard: {index: .index, count: .count},
     runs_on: ($labels[$device] // ["self-hosted", $entry.architecture, $device])}
]
