"""The rules of the one secret detector (:mod:`journal_agent.secret_text`), as data.

A rule is ``(kind, hints, pattern, check)``:

- ``kind`` names what was found in the one sentence a refusal says ("GitHub token");
- ``hints``: lower-case strings one of which every match contains (after
  :data:`journal_agent.secret_text` folds the few Unicode letters that IGNORECASE takes for ASCII
  ones): a text holding none of a rule's hints is never scanned by it, and a text holding none
  of any rule's hints is decided without importing ``re`` at all (the hooks pay for each import);
- ``pattern``: the regular expression (flags inline, ``(?i:…)``, where case does not matter);
  its first group named ``v…`` that took part is the secret (the name around it stays
  readable), or the whole match when it has none;
- ``check``: the name of the test the value must pass as well ("" for none), in
  ``secret_text._CHECKS``: what tells ``password = "Tr0ub4dor&3"`` from ``password: str``,
  or a 40-character AWS secret from a 40-character camel-case identifier.

Stdlib only and free of imports: the hooks load this module on a turn whose text holds a hint.
tests/security/secret_corpus.toml holds the shapes each rule must find and the near misses it
must leave alone; benchmarks/bench_secrets.py measures precision and recall over it.
"""

from __future__ import annotations

# A quoted or bare command-line value: 'x y', "x y" or x.
_ARG = r"""(?:'(?P<v>[^'\n]{1,200})'|"(?P<v2>[^"\n]{1,200})"|(?P<v3>[^\s'"|;&]{1,200}))"""
# The rest of a command up to an option: same line, not past a pipe or a command separator.
_SAME_COMMAND = r"[^\n|;&]*?[ \t]"


def _word(prefix: str) -> str:
    """``prefix`` at the start of a word: the literal first, so the regex engine looks for it
    as fast as ``str.find`` does (a leading ``\b`` or look-behind makes it try every position),
    then a look-behind saying no letter, digit or underscore comes before it."""
    return f"{prefix}(?<![A-Za-z0-9_]{prefix})"


# By their shape alone: the whole match (or its v group) is the secret. A pattern that starts
# with (?i) is matched, in lower case, against the text folded to lower case (same offsets): a
# case-insensitive regex is several times slower in CPython than a case-sensitive one.
PROVIDERS: tuple[tuple[str, tuple[str, ...], str, str], ...] = (
    ("private key block", ("-----begin",),
     r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
     r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)", ""),
    # A PEM private key base64-encoded once more (kubeconfig's client-key-data, k8s secrets):
    # base64 of "-----BEGIN"; certificates start the same, so the check decodes it.
    ("base64-encoded private key", ("ls0tls1crudjti",),
     _word("LS0tLS1CRUdJTi") + r"[A-Za-z0-9+/]{20,}={0,2}", "pem"),
    ("PuTTY private key", ("private-lines",),
     r"Private-Lines: \d+\r?\n(?P<v>(?:[A-Za-z0-9+/=]{4,}(?:\r?\n|\Z))+)", ""),
    ("Anthropic API key", ("sk-ant-",), _word("sk-ant-") + r"[A-Za-z0-9_\-]{8,}", "shape"),
    ("OpenAI API key", ("sk-",),
     _word("sk-") + r"(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}", "shape"),
    ("GitHub token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
     _word("gh[pousr]_") + r"[A-Za-z0-9]{20,}|" + _word("github_pat_") + r"[A-Za-z0-9_]{20,}",
     "shape"),
    ("GitLab token", ("glpat-", "gldt-", "glrt-", "glptt-", "glsoat-", "glcbt-", "gloas-"),
     _word("gl") + r"(?:pat|dt|rt|ptt|soat|cbt|oas)-[A-Za-z0-9_\-]{20,}", "shape"),
    ("Hugging Face token", ("hf_", "api_org_"),
     _word("hf_") + r"[A-Za-z0-9]{20,}|" + _word("api_org_") + r"[A-Za-z0-9]{30,}", "shape"),
    ("Slack token", ("xox", "xapp-"),
     _word("xox") + r"[abposr]-[A-Za-z0-9-]{10,}|" + _word("xapp-") + r"\d-[A-Za-z0-9-]{20,}",
     "shape"),
    ("Slack webhook URL", ("hooks.slack.com",),
     r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<v>[A-Za-z0-9/_\-]{20,})", ""),
    ("Discord webhook URL", ("discord",),
     r"discord(?:app)?\.com/api/webhooks/\d{5,}/(?P<v>[A-Za-z0-9_\-]{40,})", ""),
    ("AWS access key id", ("akia", "asia", "agpa", "aida", "aroa", "abia", "acca", "anpa",
                           "anva", "apka"),
     r"A(?:KIA|SIA|GPA|IDA|ROA|BIA|CCA|NPA|NVA|PKA)(?<![A-Za-z0-9_]A...)[0-9A-Z]{16}\b",
     "shape"),
    # 40 characters of base64 standing alone (not inside a longer run, as in an image): an AWS
    # secret access key when AWS, a secret or an access key id comes shortly before it.
    ("AWS secret access key", ("aws", "secret", "akia", "asia"),
     r"(?i)(?:aws|secret|akia|asia)[\s\S]{0,200}?"
     r"(?<![a-z0-9+/=])(?P<v>[a-z0-9+/]{40})(?![a-z0-9+/=])", "aws"),
    ("Google API key", ("aiza",), _word("AIza") + r"[0-9A-Za-z_\-]{35}", "shape"),
    ("Google OAuth token", ("ya29.",), _word(r"ya29\.") + r"[0-9A-Za-z_\-]{20,}", "shape"),
    ("Google OAuth client secret", ("gocspx-",), _word("GOCSPX-") + r"[A-Za-z0-9_\-]{28}",
     "shape"),
    ("Stripe key", ("k_live_", "k_test_", "whsec_"),
     r"[rsp]k_(?<![A-Za-z0-9_][rsp]k_)(?:live|test)_[0-9A-Za-z]{16,}|"
     + _word("whsec_") + r"[A-Za-z0-9]{24,}", "shape"),
    ("npm token", ("npm_",), _word("npm_") + r"[A-Za-z0-9]{36}\b", "shape"),
    ("PyPI token", ("pypi-",), _word("pypi-AgE") + r"[A-Za-z0-9_\-]{40,}", "shape"),
    ("SendGrid key", ("sg.",), _word(r"SG\.") + r"[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}",
     "shape"),
    ("Twilio API key", ("sk",), _word("SK") + r"[0-9a-f]{32}\b", "shape"),
    ("Mailgun key", ("key-",), _word("key-") + r"[0-9a-f]{32}\b", "shape"),
    ("Databricks token", ("dapi",), _word("dapi") + r"[0-9a-f]{32}(?:-\d)?\b", "shape"),
    ("DigitalOcean token", ("_v1_",),
     _word("do") + r"[opr]_v1_[a-f0-9]{64}\b", "shape"),
    ("Replicate token", ("r8_",), _word("r8_") + r"[A-Za-z0-9]{37}\b", "shape"),
    ("Groq API key", ("gsk_",), _word("gsk_") + r"[A-Za-z0-9]{48,}\b", "shape"),
    ("Perplexity API key", ("pplx-",), _word("pplx-") + r"[A-Za-z0-9]{40,}\b", "shape"),
    ("xAI API key", ("xai-",), _word("xai-") + r"[A-Za-z0-9]{60,}\b", "shape"),
    ("Tavily API key", ("tvly-",), _word("tvly-") + r"(?:dev-)?[A-Za-z0-9]{24,}\b", "shape"),
    ("LangSmith API key", ("lsv2_",), _word("lsv2_") + r"(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}\b",
     "shape"),
    ("Shopify token", ("shpat_", "shpca_", "shppa_", "shpss_"),
     _word("shp") + r"(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b", "shape"),
    ("Vault token", ("hvs.", "hvb."), _word(r"hv[sb]\.") + r"[A-Za-z0-9_\-]{24,}", "shape"),
    ("age secret key", ("age-secret-key-1",), _word("AGE-SECRET-KEY-1") + r"[0-9A-Z]{58}\b",
     "shape"),
    ("Telegram bot token", (":aa",), r":(?<=[0-9]{8}:)(?P<v>AA[A-Za-z0-9_\-]{33})\b", "shape"),
    ("Notion token", ("secret_", "ntn_"),
     _word("secret_") + r"[A-Za-z0-9]{43}\b|" + _word("ntn_") + r"[A-Za-z0-9]{40,}\b", "shape"),
    ("Linear API key", ("lin_api_",), _word("lin_api_") + r"[A-Za-z0-9]{40}\b", "shape"),
    ("Postman API key", ("pmak-",), _word("PMAK-") + r"[a-f0-9]{24}-[a-f0-9]{34}\b", "shape"),
    ("Atlassian API token", ("atatt3",), _word("ATATT3") + r"[A-Za-z0-9_\-=]{50,}", "shape"),
    ("Docker Hub token", ("dckr_pat_",), _word("dckr_pat_") + r"[A-Za-z0-9_\-]{20,}", "shape"),
    ("JSON web token", ("eyj",),
     _word("eyJ") + r"[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*", ""),
    # W&B keys are 40 hex digits, like a git commit: only after "wandb" and a word that says
    # key or login, on the same line (``wandb login KEY``, ``WANDB_API_KEY=KEY``).
    ("W&B API key", ("wandb",),
     r"(?i)wandb(?<![a-z0-9_]wandb)[^\n]{0,60}?(?:login|key|token|api)[^\n]{0,24}?"
     r"(?<![0-9a-z])(?P<v>(?:local-)?[0-9a-f]{40})(?![0-9a-z])", ""),
)  # fmt: skip

# Where a credential sits in a line, whatever it looks like: the v group is the secret.
PLACES: tuple[tuple[str, tuple[str, ...], str, str], ...] = (
    ("bearer token", ("bearer",),
     r"(?i)bearer(?<![a-z0-9_]bearer)[ \t]+(?P<v>[a-z0-9._~+/\-]{16,}=*)", "token"),
    # "Basic " then base64 of user:password (decoded to check: "basic training" is not).
    ("basic auth credentials", ("basic",),
     r"(?i)basic(?<![a-z0-9_]basic)[ \t]+(?P<v>[a-z0-9+/]{4,}={0,2})(?![a-z0-9+/=])", "basic"),
    ("authorization header", ("authorization",),
     r"(?i)authorization[\"']?[ \t]*[:=][ \t]*[\"']?"
     r"(?:(?:token|digest|apikey|key|sso-key)[ \t]+)?(?P<v>[a-z0-9._~+/\-=:]{16,})", "token"),
    # The password in a URL's user information: postgres://user:PASSWORD@host/db.
    ("password in a URL", ("://",),
     r"://(?<=[A-Za-z0-9+.\-]://)[^/\s:@'\"]*:(?P<v>[^/\s@'\"]{1,200})@[^\s/@'\"]",
     "placeholder"),
    # .netrc: machine HOST login USER password PASS (on one line or several).
    (".netrc password", ("password",),
     r"(?i)(?:machine\s+\S+|default)(?:\s+(?:login|account|port)\s+\S+)*"
     r"\s+password\s+(?P<v>\S+)", "command"),
    ("password on a mysql command line", ("mysql", "mariadb"),
     r"(?:mysql[a-z]*|mariadb[a-z\-]*)\b" + _SAME_COMMAND
     + r"-p(?:'(?P<v>[^'\n]+)'|\"(?P<v2>[^\"\n]+)\"|(?P<v3>[^\s'\"]+))", "command"),
    ("sshpass password", ("sshpass",),
     r"sshpass\b" + _SAME_COMMAND + r"-p[ \t]*" + _ARG, "command"),
    ("redis password", ("redis-cli",),
     r"redis-cli\b" + _SAME_COMMAND + r"(?:-a|--pass)[ \t]+" + _ARG, "command"),
    ("docker login password", ("docker",),
     r"docker[ \t]+login\b" + _SAME_COMMAND + r"(?:-p|--password)[ \t]+" + _ARG, "command"),
    ("password on a curl command line", ("curl",),
     r"curl\b" + _SAME_COMMAND + r"(?:-u|--user)[ \t]*[\"']?[^\s:\"']+:(?P<v>[^\s\"'@]+)",
     "command"),
    ("password option", ("--pass",),
     r"--(?<![\w-]--)(?:password|passwd|db-password)[ \t]+" + _ARG, "password"),
    ("token option", ("--token", "--api-key", "--apikey", "--secret", "--access-token",
                      "--auth-token"),
     r"--(?<![\w-]--)(?:token|api-key|apikey|secret|access-token|auth-token)[ \t]+" + _ARG,
     "token"),
    ("Azure storage key", ("accountkey", "sharedaccesskey", "sharedsecretvalue"),
     r"(?i)(?:accountkey|sharedaccesskey|sharedsecretvalue)[ \t]*=[ \t]*"
     r"(?P<v>[a-z0-9+/]{20,}={0,2})", ""),
    ("Azure SAS signature", ("sig=",),
     r"sig=(?<=[?&;]sig=)(?P<v>[A-Za-z0-9%+/]{20,}={0,2})", ""),
    # Server=db;User Id=sa;Password=my secret;  (the value runs to the ";")
    ("password in a connection string", ("password", "pwd"),
     r"(?i)(?:password|pwd)[ \t]*=[ \t]*(?P<v>[^;\n\"'<>]{1,200}?)[ \t]*(?=;)"
     r"|;[ \t]*(?:password|pwd)[ \t]*=[ \t]*(?P<v2>[^;\n\"']{1,200})", "command"),
    # "the password is hunter2", "my api key is …": prose; the check reads the name (n).
    ("password in prose", ("pass", "secret", "token", "key"),
     r"(?i)(?P<n>password|passphrase|passwd|passcode|secret|token|api[ _\-]?key|"
     r"access[ _\-]?key|secret[ _\-]?key)"
     r"(?:[ \t]+(?:for|of|to|on)(?:[ \t]+[^\s:=]+){1,3}?)?"
     r"[ \t]+(?:is|was)[ \t]*:?[ \t]*"
     r"(?:[\"'`](?P<v>[^\"'`\n]{3,100})[\"'`]|(?P<v2>[^\s\"'`]+))", "prose"),
)  # fmt: skip

# "pw" / "pass" only as a suffix (db_pw, DB_PASS) or "pw" alone: "bypass:" is prose.
_PASSWORD_NAME = (
    r"(?:password|passwd|passphrase|pwd|sshpass|pw(?<=[_.\-]pw)|pass(?<=[_.\-]pass)|"
    r"pw(?<![a-z0-9_.\-]pw))"
)
_KEY_NAME = (
    r"(?:secret|token|api[_\-]?key|apikey|access[_\-]?key|secret[_\-]?key|private[_\-]?key|"
    r"auth|credentials?|client[_\-]?secret|signing[_\-]?key|sessionid)"
)
# NAME <sep> VALUE, NAME ending in a secret-like word (``my_db_pw``, ``AWS_SECRET_ACCESS_KEY``),
# the separator "=", ":" or ":=", the value quoted (spaces allowed) or a bare word (taken whole:
# ``password: Optional[str]`` is a type, ``password = get_password()`` a call).
ASSIGNMENT = (
    "assignment",
    ("pass", "pw", "secret", "token", "key", "auth", "credential", "sessionid"),
    r"(?i)(?:(?P<pw>" + _PASSWORD_NAME + r")|" + _KEY_NAME + r")s?"
    r"[\"']?[ \t]*(?::=|=|:)[ \t]*"
    r"(?:(?P<q>[\"'])(?P<v>[^\"'\n]{4,200})(?P=q)|(?P<v2>[^\s\"',;&()\[\]{}]{6,200}+)(?![\[(]))",
    "assignment",
)
# KEY=value lines of .env files and shell profiles whose NAME (upper case, ending in a secret-like
# word: the check looks back at the rest of it) says secret: any value that is not a placeholder,
# a number, a flag or a path (a .env value need not look random).
ENV_LINE = (
    ".env secret",
    ("key", "token", "secret", "pass", "pwd", "credential", "auth"),
    r"(?:KEY|TOKEN|SECRET|(?P<pw>PASSWORD|PASSWD|PASS|PWD)|CREDENTIALS?|AUTH)S?="
    r"(?:\"(?P<v>[^\"\n]{1,200})\"|'(?P<v2>[^'\n]{1,200})'|(?P<v3>[^\s\"'#]{1,200}))",
    "env",
)

# Values that stand for a secret without being one.
PLACEHOLDER = (
    r"^(?:<.*|\[.*\]|\{.*|\(.*\)|\$.*|%.*%|%\(.*\)s|\*+|•+|x+|\.+|…|-+|_+|\?+|0+|"
    r"your[_\- ].*|.*example.*|changeme|change[_\-]me|dummy|placeholder|none|null|nil|true|"
    r"false|yes|no|undefined|redacted|secret|password|passwd|token|env|required|optional|"
    r"os\.environ.*|os\.getenv.*|getenv.*|environ.*|process\.env.*|env\..*|"
    r"settings\..*|config\..*|self\..*|args\..*|cfg\..*|opts?\..*|secrets\..*)$"
)
