# Sourced (`. git_read_token.sh`) by a workflow step that reads a git: store ($BENCHTRAIL_STORE) over
# HTTPS: lets git authenticate to $GITHUB_SERVER_URL with the job's $GITHUB_TOKEN (a private
# repository's data branch), as actions/checkout's persisted credentials would, but for this step's
# processes only (GIT_CONFIG_* environment variables, never the checkout's .git/config, which the
# project's code could read in later steps). benchtrail's git store adds its own settings after these.
# Nothing happens for another store, without a token, or when the step already has an SSH command
# (the deploy key of a postsubmit run, whose `origin` is an SSH URL).
if [[ "${BENCHTRAIL_STORE:-}" == git:* ]] && [ -n "${GITHUB_TOKEN:-}" ] && [ -z "${GIT_SSH_COMMAND:-}" ]; then
  _benchtrail_basic=$(printf 'x-access-token:%s' "$GITHUB_TOKEN" | base64 | tr -d '\n')
  _benchtrail_n=${GIT_CONFIG_COUNT:-0}
  export "GIT_CONFIG_KEY_${_benchtrail_n}=http.${GITHUB_SERVER_URL:-https://github.com}/.extraheader"
  export "GIT_CONFIG_VALUE_${_benchtrail_n}=AUTHORIZATION: basic ${_benchtrail_basic}"
  export GIT_CONFIG_COUNT=$((_benchtrail_n + 1))
  echo "::add-mask::${_benchtrail_basic}"
  unset _benchtrail_basic _benchtrail_n
fi
