package contract

import "strings"

// What the reader knows of Python's builtins and standard library: an
// allowlist. A name that is not here is not followed and makes the
// contract unverified. Categories:
//
//	p  a function of plain data to plain data that calls nothing it is given
//	f  a function that may call or keep what it is given (handed away: escape)
//	c  a class of plain value objects (datetime, Decimal): calling it, and any
//	   attribute of it, gives plain data; what it is given is handed away
//	v  a plain data value
//	m  a module
//	x  an exception class
//	s  modelled one by one in callBuiltin
//	r  reaches a descriptor, a process, the network or the host: raw-channel
//	d  imports at run time: dynamic-import
//	e  runs code it is given: eval
//	i  introspection
const (
	catPure      = 'p'
	catCalls     = 'f'
	catClass     = 'c'
	catValue     = 'v'
	catModule    = 'm'
	catException = 'x'
	catSpecial   = 's'
	catRaw       = 'r'
	catImport    = 'd'
	catEval      = 'e'
	catIntro     = 'i'
)

// builtins maps Python's builtin names to their categories.
var builtins = map[string]byte{
	"print": 's', "len": 's', "str": 's', "repr": 's', "ascii": 's', "format": 's', "int": 's', "float": 's',
	"bool": 's', "complex": 'p', "abs": 'p', "round": 'p', "divmod": 'p', "pow": 'p', "hash": 'p', "id": 'p',
	"ord": 'p', "chr": 'p', "hex": 'p', "oct": 'p', "bin": 'p', "callable": 'p', "isinstance": 'p',
	"issubclass": 'p', "hasattr": 's', "input": 'p', "dir": 'p', "min": 's', "max": 's', "sum": 's', "any": 's',
	"all": 's', "list": 's', "tuple": 's', "set": 's', "frozenset": 's', "dict": 's', "sorted": 's',
	"reversed": 's', "enumerate": 's', "zip": 's', "range": 's', "map": 's', "filter": 's', "iter": 's',
	"next": 's', "getattr": 's', "setattr": 's', "delattr": 's', "type": 's', "open": 's', "eval": 'e',
	"exec": 'e', "compile": 'e', "__import__": 'd', "globals": 'i', "locals": 'i', "vars": 'i',
	"breakpoint": 'e', "help": 'i', "memoryview": 'p', "super": 's', "object": 'p', "staticmethod": 's',
	"classmethod": 's', "property": 's', "exit": 's', "quit": 's', "bytes": 'p', "bytearray": 'p', "slice": 'f',
	"aiter": 'i', "anext": 'i', "NotImplemented": 'v', "Ellipsis": 'v',
}

var exceptionNames = strings.Fields(`BaseException Exception ArithmeticError AssertionError AttributeError
	BlockingIOError BrokenPipeError BufferError ChildProcessError ConnectionAbortedError ConnectionError
	ConnectionRefusedError ConnectionResetError EOFError EnvironmentError FileExistsError FileNotFoundError
	FloatingPointError GeneratorExit IOError ImportError IndentationError IndexError InterruptedError
	IsADirectoryError KeyError KeyboardInterrupt LookupError MemoryError ModuleNotFoundError NameError
	NotADirectoryError NotImplementedError OSError OverflowError PermissionError ProcessLookupError
	RecursionError ReferenceError RuntimeError StopAsyncIteration StopIteration SyntaxError SystemError
	SystemExit TabError TimeoutError TypeError UnboundLocalError UnicodeDecodeError UnicodeEncodeError
	UnicodeError UnicodeTranslateError ValueError ZeroDivisionError Warning UserWarning DeprecationWarning
	RuntimeWarning ExceptionGroup BaseExceptionGroup`)

func init() {
	for _, e := range exceptionNames {
		builtins[e] = 'x'
	}
}

func isExceptionName(name string) bool {
	if builtins[name] == 'x' {
		return true
	}
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		if m := modules[name[:i]]; m != nil && m.attrs[name[i+1:]] == 'x' {
			return true
		}
	}
	return false
}

// modInfo is one module: its attributes, and the category of any public
// attribute not listed (0: none, so unlisted attributes are unknown).
type modInfo struct {
	attrs map[string]byte
	rest  byte
	// deny is the category of the module itself when it is not to be used
	// at all (0: it is).
	deny byte
}

func attrs(cat byte, names string) map[string]byte {
	m := map[string]byte{}
	for _, n := range strings.Fields(names) {
		m[n] = cat
	}
	return m
}

func with(m map[string]byte, cat byte, names string) map[string]byte {
	for _, n := range strings.Fields(names) {
		m[n] = cat
	}
	return m
}

// modules is the standard library the reader follows (and the modules it
// knows not to follow, with why).
var modules = map[string]*modInfo{
	"gatehouse": {attrs: with(with(attrs('s', "call get post put patch delete head options"), 'x', "Error Refused"), 'c', "Response")},
	"json":      {attrs: with(with(attrs('f', "loads load dumps dump"), 'x', "JSONDecodeError"), 'c', "JSONEncoder JSONDecoder")},
	"re": {attrs: with(with(with(attrs('f', "compile match search fullmatch findall finditer sub subn split escape purge"),
		'v', "IGNORECASE I MULTILINE M DOTALL S VERBOSE X ASCII A UNICODE U NOFLAG"), 'x', "error"), 'c', "Pattern Match RegexFlag")},
	"os": {attrs: with(with(with(attrs('v', "environ sep linesep pathsep curdir pardir name extsep devnull altsep defpath"),
		'f', "getenv"), 'p', "getcwd getcwdb getpid getppid cpu_count urandom listdir getuid getgid geteuid getegid getlogin times uname fsencode fsdecode fspath strerror get_terminal_size stat lstat scandir walk access getpgrp umask"),
		'm', "path"), rest: 'r'},
	"os.path": {attrs: with(attrs('p', "basename dirname split splitext exists lexists isfile isdir islink isabs ismount abspath normpath normcase realpath relpath expanduser expandvars getsize getmtime getatime getctime commonpath commonprefix samefile splitdrive"),
		's', "join")},
	"posixpath": {attrs: with(attrs('p', "basename dirname split splitext exists isfile isdir isabs abspath normpath realpath relpath commonpath commonprefix"), 's', "join")},
	"sys": {attrs: with(with(attrs('v', "argv stdin stdout stderr version version_info platform maxsize byteorder executable implementation float_info hexversion api_version copyright flags maxunicode"),
		'p', "getdefaultencoding getfilesystemencoding getrecursionlimit getsizeof"), 's', "exit"), rest: 'i'},
	"time":        {rest: 'p'},
	"datetime":    {attrs: with(attrs('c', "datetime date time timedelta timezone tzinfo"), 'v', "MINYEAR MAXYEAR UTC")},
	"zoneinfo":    {attrs: attrs('c', "ZoneInfo")},
	"decimal":     {attrs: with(attrs('x', "DecimalException InvalidOperation DivisionByZero Inexact Rounded Overflow Underflow Subnormal Clamped FloatOperation"), 'p', "getcontext setcontext"), rest: 'c'},
	"math":        {rest: 'p'},
	"cmath":       {rest: 'p'},
	"statistics":  {attrs: attrs('x', "StatisticsError"), rest: 'f'}, // mode, median_low return an item they are given
	"fractions":   {rest: 'c'},
	"numbers":     {rest: 'v'},
	"operator":    {attrs: attrs('i', "attrgetter methodcaller"), rest: 'f'},
	"string":      {attrs: with(attrs('v', "ascii_letters ascii_lowercase ascii_uppercase digits hexdigits octdigits punctuation printable whitespace"), 'c', "Template Formatter"), rest: 'p'},
	"textwrap":    {rest: 'p'},
	"base64":      {rest: 'p'},
	"binascii":    {rest: 'p'},
	"hashlib":     {rest: 'c'},
	"hmac":        {rest: 'c'},
	"secrets":     {rest: 'f'}, // choice returns an item it is given
	"zlib":        {rest: 'p'},
	"uuid":        {rest: 'c'},
	"unicodedata": {rest: 'p'},
	"calendar":    {rest: 'p'},
	"keyword":     {rest: 'p'},
	"html":        {rest: 'p'},
	"difflib":     {rest: 'c'},
	"pprint":      {rest: 'p'},
	"struct":      {attrs: attrs('x', "error"), rest: 'p'},
	"heapq":       {attrs: attrs('s', "heappush heappop heapify heapreplace heappushpop nlargest nsmallest merge")},
	"bisect":      {attrs: with(attrs('p', "bisect bisect_left bisect_right"), 's', "insort insort_left insort_right")},
	"random":      {attrs: attrs('s', "choice choices sample shuffle"), rest: 'p'},
	"copy":        {attrs: with(attrs('s', "copy deepcopy"), 'x', "Error")},
	"enum":        {attrs: with(attrs('s', "Enum IntEnum StrEnum Flag IntFlag unique"), 'p', "auto")},
	"dataclasses": {attrs: with(with(attrs('s', "dataclass field"), 'f', "asdict astuple fields replace is_dataclass make_dataclass"), 'x', "FrozenInstanceError")},
	"typing": {attrs: with(with(attrs('s', "NamedTuple Protocol Generic cast overload final runtime_checkable TYPE_CHECKING TypedDict"),
		'e', "get_type_hints"), 'i', "get_origin get_args"), rest: 'v'},
	"collections":     {attrs: with(attrs('s', "OrderedDict defaultdict deque namedtuple"), 'c', "Counter ChainMap UserDict UserList UserString"), rest: 0},
	"collections.abc": {rest: 'v'},
	"itertools":       {rest: 's'},
	"functools":       {attrs: attrs('s', "partial reduce lru_cache cache wraps cached_property total_ordering cmp_to_key"), rest: 0},
	"contextlib":      {attrs: attrs('s', "contextmanager suppress nullcontext closing")},
	"abc":             {attrs: attrs('s', "ABC abstractmethod ABCMeta")},
	"logging": {attrs: with(with(attrs('p', "debug info warning warn error critical exception log getLevelName disable captureWarnings"),
		'v', "DEBUG INFO WARNING WARN ERROR CRITICAL FATAL NOTSET"), 's', "getLogger basicConfig")},
	"csv":          {attrs: with(attrs('v', "QUOTE_ALL QUOTE_MINIMAL QUOTE_NONE QUOTE_NONNUMERIC excel excel_tab unix_dialect"), 'x', "Error"), rest: 'c'},
	"io":           {attrs: attrs('c', "StringIO BytesIO"), rest: 'r'},
	"urllib":       {attrs: attrs('m', "parse")},
	"urllib.parse": {attrs: with(attrs('s', "quote quote_plus quote_from_bytes urljoin"), 'p', "unquote unquote_plus urlencode urlparse urlsplit urlunparse urlunsplit parse_qs parse_qsl urldefrag")},
	"warnings":     {rest: 'p'},
	"traceback":    {attrs: attrs('p', "print_exc format_exc print_exception format_exception format_exception_only print_stack format_stack")},
	"shlex":        {rest: 'p'},
	"fnmatch":      {rest: 'p'},
	"glob":         {rest: 'p'},
	"locale":       {rest: 'p'},
	"ipaddress":    {rest: 'c'},
	"array":        {rest: 'c'},
	"__future__":   {rest: 'v'},
	// argparse reads sys.argv into plain values; FileType opens the files it names.
	"argparse": {attrs: with(with(attrs('c', "ArgumentParser Namespace HelpFormatter RawTextHelpFormatter RawDescriptionHelpFormatter ArgumentDefaultsHelpFormatter MetavarTypeHelpFormatter BooleanOptionalAction"),
		'v', "SUPPRESS REMAINDER OPTIONAL ZERO_OR_MORE ONE_OR_MORE"), 'x', "ArgumentError ArgumentTypeError"), rest: 0},
	"configparser": {attrs: with(attrs('c', "ConfigParser RawConfigParser SectionProxy"), 'x', "Error NoSectionError NoOptionError DuplicateSectionError DuplicateOptionError ParsingError")},
	"platform":     {rest: 'p'},

	// Modules that reach past the gateway, or run what they are given.
	"subprocess": {deny: 'r'}, "socket": {deny: 'r'}, "ssl": {deny: 'r'}, "http": {deny: 'r'},
	"urllib.request": {deny: 'r'}, "urllib.error": {deny: 'r'}, "urllib.response": {deny: 'r'},
	"urllib.robotparser": {deny: 'r'}, "ftplib": {deny: 'r'}, "smtplib": {deny: 'r'}, "poplib": {deny: 'r'},
	"imaplib": {deny: 'r'}, "telnetlib": {deny: 'r'}, "xmlrpc": {deny: 'r'}, "select": {deny: 'r'},
	"selectors": {deny: 'r'}, "asyncio": {deny: 'r'}, "threading": {deny: 'r'}, "_thread": {deny: 'r'},
	"multiprocessing": {deny: 'r'}, "concurrent": {deny: 'r'}, "signal": {deny: 'r'}, "mmap": {deny: 'r'},
	"ctypes": {deny: 'r'}, "fcntl": {deny: 'r'}, "pty": {deny: 'r'}, "tty": {deny: 'r'}, "termios": {deny: 'r'},
	"resource": {deny: 'r'}, "shutil": {deny: 'r'}, "tempfile": {deny: 'r'}, "posix": {deny: 'r'},
	"_posixsubprocess": {deny: 'r'}, "_io": {deny: 'r'}, "pathlib": {deny: 'r'}, "tarfile": {deny: 'r'},
	"zipfile": {deny: 'r'}, "sqlite3": {deny: 'r'}, "dbm": {deny: 'r'}, "webbrowser": {deny: 'r'},
	"requests": {deny: 'r'}, "httpx": {deny: 'r'}, "aiohttp": {deny: 'r'},
	"urllib3": {deny: 'r'}, "pickle": {deny: 'e'}, "marshal": {deny: 'e'}, "shelve": {deny: 'e'},
	"code": {deny: 'e'}, "codeop": {deny: 'e'}, "pdb": {deny: 'e'}, "bdb": {deny: 'e'},
	"importlib": {deny: 'd'}, "imp": {deny: 'd'}, "pkgutil": {deny: 'd'}, "runpy": {deny: 'd'},
	"zipimport": {deny: 'd'}, "inspect": {deny: 'i'}, "gc": {deny: 'i'},
	// types: only its plain value classes; FunctionType, CodeType and the like make code.
	"types":    {attrs: attrs('c', "SimpleNamespace MappingProxyType"), rest: 'i'},
	"builtins": {deny: 'i'}, "__main__": {deny: 'i'}, "__builtin__": {deny: 'i'}, "weakref": {deny: 'i'},
	"atexit": {deny: 'i'}, "sysconfig": {deny: 'i'}, "site": {deny: 'i'}, "ast": {deny: 'e'}, "dis": {deny: 'i'},
}

// denyReason turns a denying category into a Reason and what to say.
func denyReason(cat byte) (Reason, string) {
	switch cat {
	case catRaw:
		return ReasonRawChannel, "reaches a descriptor, a process, the network or the host beside the gateway"
	case catImport:
		return ReasonDynamicImport, "imports modules chosen at run time"
	case catEval:
		return ReasonEval, "runs code it is given"
	case catIntro:
		return ReasonIntrospection, "looks into the program's own objects, frames or builtins"
	}
	return ReasonUnknownHelper, "is not something the reader knows"
}

// clientImports are the modules the gatehouse client module itself
// imports: a file beside the program named like one would run in its
// place. A test checks this against the client's source.
var clientImports = []string{"base64", "json", "os", "urllib"}

// moduleInert reports whether module name may be handed to code the
// reader does not see: nothing in it, nor in its submodules, reaches past
// the gateway, runs code, imports or looks into the program, so calling
// anything of it through run-time data is covered by the arguments being
// handed away. The client itself is not inert.
func moduleInert(name string) bool {
	return moduleInertDepth(name, 0)
}

func moduleInertDepth(name string, depth int) bool {
	m := modules[name]
	if m == nil || name == "gatehouse" || m.deny != 0 || depth > 4 {
		return false
	}
	unsafe := func(c byte) bool { return c == catRaw || c == catEval || c == catImport || c == catIntro }
	if unsafe(m.rest) {
		return false
	}
	for attr, c := range m.attrs {
		if unsafe(c) || c == catModule && !moduleInertDepth(name+"."+attr, depth+1) {
			return false
		}
	}
	return true
}

// moduleKnown reports whether the reader follows module name (a dotted
// name), and if it must not be used, why.
func moduleKnown(name string) (*modInfo, bool) {
	m, ok := modules[name]
	return m, ok
}

// builtinName is the value of a builtin name, nil when Python has none
// by that name.
func builtinName(name string) value {
	switch name {
	case "None":
		return noneV
	case "True":
		return trueV
	case "False":
		return falseV
	case "NotImplemented":
		return data{hint: "NotImplemented"}
	case "Ellipsis":
		return cnst{k: 'e', text: "..."}
	}
	if _, ok := builtins[name]; ok {
		return builtin{name: name}
	}
	return nil
}

// category returns a builtin value's category by its full name.
func category(name string) byte {
	if c, ok := builtins[name]; ok {
		return c
	}
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return 0
	}
	mod, attr := name[:i], name[i+1:]
	m := modules[mod]
	if m == nil {
		return 0
	}
	if c, ok := m.attrs[attr]; ok {
		return c
	}
	if !strings.HasPrefix(attr, "_") {
		return m.rest
	}
	return 0
}
