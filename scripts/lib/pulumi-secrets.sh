# shellcheck shell=bash
# Which passphrase a Pulumi command gets for its stack's secrets, sourced by scripts/with-toolchain.sh
# (for `pulumi …`) and infra/bin/pulumi-stack.sh (the infra:* targets).
#
# Only the embedded `local` stack, on the repository's own file backend, has a default passphrase
# (`kdgat-local`, public: its only secret is nothing). Any other stack on a file backend keeps its
# secrets (an SSH key, a token) encrypted in stacks/<stack>.yaml and in the state under a
# passphrase that only its user knows, or under another secrets provider named in that file
# (`secretsprovider: awskms://…`). A command that needs them while neither is set is refused in
# one line that names the stack and the command that fixes it: never run under a passphrase that
# anyone who reads this file knows. Other backends (Pulumi Cloud) bring their own secrets provider.
#
# Measured with Pulumi 3.259 (passphrase provider, no passphrase set): preview/up/refresh/destroy,
# `stack init`, `stack select --create`, `config set --secret`, `config get` of a secret need it;
# `stack output` (secrets shown as "[secret]"), `stack export`, `stack ls`, `config`, plain
# `config set` do not. The runner reads a stack's outputs with `pulumi stack output --json`, which
# needs no passphrase (no output of ours is a secret).

KDGAT_LOCAL_STACK=local
KDGAT_LOCAL_PASSPHRASE=kdgat-local

# The stack name without its organization/project (`organization/kdgat-hpc/local` -> `local`).
kdgat_short_stack() { printf '%s\n' "${1##*/}"; }

# kdgat_pulumi_secrets WHO STACK PROJECT_DIR DEFAULT_BACKEND WHAT [STACK_FILE]
#   WHO: the program saying it (for the message); STACK: the stack the command uses; PROJECT_DIR:
#   the Pulumi project (where Pulumi.<stack>.yaml lies); DEFAULT_BACKEND: the repository's own
#   backend URL; WHAT: the command, in words, when it needs the secrets ('' when it does not);
#   STACK_FILE: the stack's config file when it is another (a workspace's, --config-file).
# Exports the default passphrase for `local` on the repository's backend; returns 1 with the
# one-line refusal on stderr when WHAT needs secrets that nothing can decrypt.
kdgat_pulumi_secrets() {
  local who=$1 stack=$2 project=$3 default_backend=$4 what=$5 file=${6:-} short provider
  # A default exported for `local` by an outer command is not this stack's passphrase.
  if [[ ${KDGAT_PULUMI_PASSPHRASE_DEFAULT:-} == 1 && ${PULUMI_CONFIG_PASSPHRASE:-} == "$KDGAT_LOCAL_PASSPHRASE" ]]; then
    unset PULUMI_CONFIG_PASSPHRASE KDGAT_PULUMI_PASSPHRASE_DEFAULT
  fi
  [[ -n ${PULUMI_CONFIG_PASSPHRASE:-} ]] && return 0
  if [[ -n ${PULUMI_CONFIG_PASSPHRASE_FILE:-} ]]; then
    [[ -f $PULUMI_CONFIG_PASSPHRASE_FILE && -r $PULUMI_CONFIG_PASSPHRASE_FILE ]] && return 0
    echo "$who: PULUMI_CONFIG_PASSPHRASE_FILE=$PULUMI_CONFIG_PASSPHRASE_FILE is not a readable file (stack ${stack:-?}): write the passphrase there, readable by you only (chmod 600)" >&2
    return 1
  fi
  short=$(kdgat_short_stack "$stack")
  if [[ $short == "$KDGAT_LOCAL_STACK" && ${PULUMI_BACKEND_URL:-} == "$default_backend" ]]; then
    export PULUMI_CONFIG_PASSPHRASE=$KDGAT_LOCAL_PASSPHRASE KDGAT_PULUMI_PASSPHRASE_DEFAULT=1
    return 0
  fi
  [[ -n $what && -n $short ]] || return 0
  [[ ${PULUMI_BACKEND_URL:-} == file://* ]] || return 0
  [[ -n $file ]] || file=$project/Pulumi.$short.yaml
  if [[ -f $file ]]; then
    provider=$(sed -n 's/^secretsprovider:[[:space:]]*//p' "$file" | head -n 1)
    [[ -n $provider && $provider != passphrase* ]] && return 0
  fi
  # shellcheck disable=SC2088 # the tilde is for the user's shell to expand
  echo "$who: $what needs the secrets of stack $short, and no passphrase is set (only the embedded local stack has a default): export PULUMI_CONFIG_PASSPHRASE_FILE=~/.config/kdgat/$short.passphrase (a file only you can read), or give the stack another secrets provider: pulumi stack change-secrets-provider <awskms://…|gcpkms://…|azurekeyvault://…|hashivault://…> --stack $short" >&2
  return 1
}

# kdgat_pulumi_argv_secrets ARGS…: for `pulumi ARGS…`, prints four lines: the stack it uses (given
# with --stack/-s, or the name `stack init|select NAME` makes; '' when the command names none), the
# directory it runs in (-C/--cwd; '' for this one), the command in words when it needs the stack's
# secrets ('' when it does not), and its first word (`up`, `stack`, `version`; '' for none).
kdgat_pulumi_argv_secrets() {
  local stack='' cwd='' words=() show=0 secret=0 create=0 a
  while (($#)); do
    a=$1
    shift
    case $a in
      # An option's value is the next word; one given as the last word has none to shift.
      --stack | -s) stack=${1:-}; (($# == 0)) || shift ;;
      --stack=*) stack=${a#--stack=} ;;
      -C | --cwd) cwd=${1:-}; (($# == 0)) || shift ;;
      --cwd=*) cwd=${a#--cwd=} ;;
      --color | --tracing | --profiling | --memprofilerate) (($# == 0)) || shift ;;
      --show-secrets | --show-secrets=true) show=1 ;;
      --secret | --secret=true) secret=1 ;;
      -c | --create) create=1 ;;
      --) words+=("$@"); break ;;
      -*) ;;
      *) words+=("$a") ;;
    esac
  done
  local verb=${words[0]:-} sub=${words[1]:-} what=''
  case $verb in
    up | update | preview | refresh | destroy | import | watch | new) what="pulumi $verb" ;;
    config)
      if ((secret)); then
        what="pulumi config ${sub:-set} --secret"
      elif ((show)) || [[ $sub == refresh || $sub == cp ]]; then
        what="pulumi config${sub:+ $sub}$( ((show)) && echo ' --show-secrets')"
      fi
      ;;
    stack)
      case $sub in
        init)
          what='pulumi stack init'
          [[ -z $stack ]] && stack=${words[2]:-}
          ;;
        select)
          [[ -z $stack ]] && stack=${words[2]:-}
          ((create)) && what='pulumi stack select --create'
          ;;
        output | export | history) ((show)) && what="pulumi stack $sub --show-secrets" ;;
      esac
      ;;
  esac
  printf '%s\n%s\n%s\n%s\n' "$stack" "$cwd" "$what" "$verb"
}

# kdgat_pulumi_project DIR: the Pulumi project directory at or above DIR (as Pulumi finds it).
kdgat_pulumi_project() {
  local dir=$1
  while [[ $dir != / && ! -f $dir/Pulumi.yaml && ! -f $dir/Pulumi.yml ]]; do dir=$(dirname "$dir"); done
  printf '%s\n' "$dir"
}
