# Execution export (run-configs/execution.json) -> the job matrix list:
#   [{device_name, host_environment, shard: {index, count}}]
# Used by the workflows through the jq CLI and by the tests through the jq Python package.
[
  .devices
  | to_entries[]
  | .key as $device
  | .value.host_environment as $host
  | .value.shards[]
  | {device_name: $device, host_environment: $host, shard: {index: .index, count: .count}}
]
