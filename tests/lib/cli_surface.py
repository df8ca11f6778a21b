#!/usr/bin/env python3
"""Checks the man page and the zsh completion against the parser's own list of
commands and options (`git-mullet --dump-cli-json`, read from stdin).

usage: cli_surface.py man MAN_PAGE  |  cli_surface.py zsh _git-mullet

Prints one line per missing entry and exits 1 when there is any. The bash and
fish completions are checked in those shells (tests/e2e/test_cli_surface.sh).
"""
import json
import re
import sys


def long_names(option):
    return [name for name in option["names"] if name.startswith("--") and name != "--help"]


def short_names(option):
    return [name for name in option["names"] if not name.startswith("--") and name != "-h"]


def man_sections(text):
    """The text of each `.SS "git mullet NAME"` section, by NAME."""
    sections = {}
    for match in re.finditer(r'^\.SS "git mullet (\S+)"\n(.*?)(?=^\.S[SH] )', text, re.M | re.S):
        sections[match.group(1)] = match.group(2)
    return sections


def check_man(cli, text):
    missing = []
    roff = text.replace("\\-", "-")
    sections = man_sections(text)
    synopsis = re.search(r"^\.SH SYNOPSIS\n(.*?)^\.SH ", text, re.M | re.S).group(1).replace("\\-", "-")
    exit_status = re.search(r"^\.SH EXIT STATUS\n(.*?)^\.SH ", text, re.M | re.S).group(1)
    for command in cli["commands"]:
        name = command["name"]
        if name not in sections:
            missing.append(f'man: no section .SS "git mullet {name}"')
            continue
        body = sections[name].replace("\\-", "-")
        if f"git mullet {name}" not in synopsis.replace("\\fB", "").replace("\\fR", ""):
            missing.append(f"man: {name} is not in the SYNOPSIS")
        for option in command["options"]:
            for spelling in long_names(option) + short_names(option):
                if not re.search(r"\\fB" + re.escape(spelling) + r"(?![\w-])", body):
                    missing.append(f"man: {name} {spelling} is not in its section")
        codes = ", ".join(sorted(command["exit_codes"]))
        if not codes:
            missing.append(f"parser: {name} documents no exit codes (cli/app.cpp exit_codes)")
        elif not re.search(r"^\\fB" + re.escape(name) + r"\\fR: " + re.escape(codes) + r"$", exit_status, re.M):
            missing.append(f"man: EXIT STATUS does not give {name}: {codes}")
    for option in cli["options"]:
        for spelling in long_names(option):
            if spelling not in roff:
                missing.append(f"man: git mullet {spelling} is not documented")
    return missing


def check_zsh(cli, text):
    missing = []
    commands = re.search(r"commands=\((.*?)\n\s*\)", text, re.S).group(1)
    blocks = {}
    per_command = text[text.index("case $line[1] in") :]
    for match in re.finditer(r"^\s+\(([\w|]+)\)\n(.*?)^\s+;;", per_command, re.M | re.S):
        for name in match.group(1).split("|"):
            blocks[name] = match.group(2)
    for command in cli["commands"]:
        name = command["name"]
        if f"'{name}:" not in commands:
            missing.append(f"zsh: {name} is not among the commands")
        if name not in blocks:
            missing.append(f"zsh: no ({name}) case")
            continue
        for option in command["options"]:
            for spelling in long_names(option) + short_names(option):
                if not re.search(r"['{,*]" + re.escape(spelling) + r"[=+\[,}]", blocks[name]):
                    missing.append(f"zsh: {name} {spelling} is missing")
    return missing


def main():
    cli = json.load(sys.stdin)
    kind, path = sys.argv[1], sys.argv[2]
    with open(path, encoding="utf-8") as file:
        text = file.read()
    missing = check_man(cli, text) if kind == "man" else check_zsh(cli, text)
    for line in missing:
        print(line)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
