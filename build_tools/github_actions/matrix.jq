# Execution export (run-configs/execution.json) -> the job matrix list:
#   [{device_name, host_environment, architecture, shard: {index, count}}]
# Used by the workflows through the jq CLI and by the tests through the jq Python package.
[
  .devices
  | to_entries[]
  | .key as $device
  | .value as $entry
  | $entry.shards[]
  | {device_name: $device, host_environment: $entry.host_environment, architecture: $entry.architecture,
     shard: {index: .index, count: .count}}
]
