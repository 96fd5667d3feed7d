"""`ddpjob completion bash|zsh`: a completion script made from the argparse parser itself,
so every subcommand, option and choice a later change adds completes with no edit here.
Where nothing is known (a FILE), the shell's own file-name completion takes over.
"""

from __future__ import annotations

import argparse
import shlex


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _describe(parser: argparse.ArgumentParser) -> tuple[list[str], dict[str, list[str]], list[str]]:
    """(option strings, choices of each option that has them, choices of the first
    positional that has them)."""
    options: list[str] = []
    option_choices: dict[str, list[str]] = {}
    positional: list[str] = []
    for action in parser._actions:
        if action.option_strings:
            options += action.option_strings
            if action.choices:
                for opt in action.option_strings:
                    option_choices[opt] = [str(c) for c in action.choices]
        elif action.choices and not positional and not isinstance(action, argparse._SubParsersAction):
            positional = [str(c) for c in action.choices]
    return options, option_choices, positional


def bash(parser: argparse.ArgumentParser) -> str:
    prog = parser.prog
    fn = "_" + prog.replace("-", "_")
    subs = _subcommands(parser)
    top_options, _, _ = _describe(parser)
    value_cases, option_cases, positional_cases = [], [], []
    for name, sub in subs.items():
        options, option_choices, positional = _describe(sub)
        option_cases.append(f"        {name}) opts={shlex.quote(' '.join(options))} ;;")
        for opt, choices in option_choices.items():
            value_cases.append(f"        {name}:{opt}) words={shlex.quote(' '.join(choices))} ;;")
        if positional:
            positional_cases.append(f"        {name}) words={shlex.quote(' '.join(positional))} ;;")
    lines = [
        f"# bash completion for {prog}: `source <({prog} completion bash)`",
        f"{fn}() {{",
        '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"',
        "    local cmd='' words='' opts='' i",
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        '        case "${COMP_WORDS[i]}" in -*) ;; *) cmd="${COMP_WORDS[i]}"; break ;; esac',
        "    done",
        '    if [[ -z "$cmd" ]]; then',
        f'        COMPREPLY=($(compgen -W {shlex.quote(" ".join([*subs, *top_options]))} -- "$cur"))',
        "        return",
        "    fi",
        '    case "$cmd:$prev" in',
        *value_cases,
        "    esac",
        '    if [[ -z "$words" && "$cur" == -* ]]; then',
        '        case "$cmd" in',
        *option_cases,
        "        esac",
        '        words="$opts"',
        "    fi",
        '    if [[ -z "$words" && "$prev" != -* ]]; then',
        '        case "$cmd" in',
        *positional_cases,
        "        esac",
        "    fi",
        "    # Nothing known to offer (a FILE): -o default falls back to file names.",
        '    [[ -n "$words" ]] && COMPREPLY=($(compgen -W "$words" -- "$cur"))',
        "    return 0",
        "}",
        f"complete -o default -F {fn} {prog}",
    ]
    return "\n".join(lines) + "\n"


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    if shell == "bash":
        return bash(parser)
    if shell == "zsh":
        # zsh runs bash completion functions through its bashcompinit layer.
        return "autoload -U +X bashcompinit && bashcompinit\n" + bash(parser)
    raise ValueError(f"no completion for shell {shell!r}")
