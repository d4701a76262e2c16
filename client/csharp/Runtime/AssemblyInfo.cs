using System.Runtime.CompilerServices;

// the tests and the benchmark drive the frame reader and the packed decoder directly
[assembly: InternalsVisibleTo("scened-tests")]
[assembly: InternalsVisibleTo("scened-bench")]
