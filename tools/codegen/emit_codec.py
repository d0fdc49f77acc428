"""Emit the per-version decode and encode functions of a message (the straight-line codecs).

Code shape (per message class):

* one decode function and one encode function per distinct wire layout; versions whose
  generated code is identical share a function, and ``_DECODERS`` / ``_ENCODERS`` map every
  version to its function;
* straight-line code with a local ``pos``, nested arrays inlined as loops, runs of fixed-size
  fields fused into one prebound ``struct.Struct(...).unpack_from`` / ``pack`` call;
* objects built with ``object.__new__`` and slot stores (no ``__init__`` call on decode);
* encode appends parts through one ``ap`` callable; RECORDS go through
  ``primitives.write_records`` / ``write_compact_records`` only.

Generated local names: ``n`` (a length or count), ``end``, ``s`` (bytes being written),
``sn`` / ``bn`` (a nullable string / bytes value), ``x``; per nesting depth ``e<d>`` (struct
being built or written), ``l<d>`` / ``a<d>`` (list and its append), and for tag buffers
``nt<d>``, ``tg<d>``, ``sz<d>``, ``tend<d>``, ``ut<d>``, ``tl<d>``, ``tv<d>``.

Typing: the functions are annotated (``decode(buf: Buffer, pos: int) -> tuple[Cls, int]``,
``encode(o: Cls, ap: Append) -> None``) and their bodies type-check under ``mypy --strict``.
A local holds values of one type only: where a name would be reused for another type it gets
a suffix (``e1_2``), and its first assignment carries the annotation (``l0: list[T] = []``);
annotations of locals are never evaluated, so the bytecode is the same as without them. A
decoder stores None only into a field whose type admits it: a -1 count of an array that is
null in no version is refused as Kafka's readers refuse it (ProtocolError), and an encoder
writes no null for such an array (None fails as ProtocolError). One place where the
codec is more lenient than the declared types carries a ``type: ignore``: an encoder writes a
field that is ``T | None`` in a version that cannot carry null (the caller must give a value
there; None fails as ProtocolError at run time).
"""

from __future__ import annotations

from codegen.emit_fields import (
    TABLE,
    Module,
    attr_type,
    default_expr,
    elem_type,
    fmt_name,
    lazy,
    optional,
    slot,
    slot_type,
    version_type,
)
from codegen.model import FIXED, FieldDef, MessageDef, StructDef


def _min_size(f: FieldDef, v: int, flex: bool, as_element: bool = False) -> int:
    """Smallest number of bytes field ``f`` (or one element of it) occupies in version v."""
    if f.array and not as_element:
        return 1 if flex else 4
    if f.type in FIXED:
        return FIXED[f.type][1]
    if f.type == "string":
        return 1 if flex else 2
    if f.type in ("bytes", "records"):
        return 1 if flex else 4
    if f.type in ("varint", "varlong"):
        return 1
    assert f.struct is not None
    if f.nullable(v) and not f.array:
        return 1
    return sum(_min_size(x, v, flex) for x in f.struct.present(v)) + (1 if flex else 0)


class _Gen:
    def __init__(self, mod: Module, msg: MessageDef, version: int) -> None:
        self.mod = mod
        self.msg = msg
        self.v = version
        self.flex = msg.flexible(version)
        self.has_tags = msg.flexible_min is not None
        self.lines: list[str] = []
        self.uses_mv = False
        self._names: dict[tuple[str, str], str] = {}
        self._taken: dict[str, int] = {}

    def w(self, ind: int, line: str) -> None:
        self.lines.append("    " * ind + line)

    def local(self, base: str, typ: str) -> tuple[str, bool]:
        """The local name for values of ``typ`` (``base``, with a suffix if ``base`` already
        holds another type in this function) and whether this is its first use."""
        name = self._names.get((base, typ))
        if name is not None:
            return name, False
        k = self._taken.get(base, 0) + 1
        self._taken[base] = k
        name = self._names[(base, typ)] = base if k == 1 else f"{base}_{k}"
        return name, True

    def bind(self, base: str, typ: str) -> tuple[str, str]:
        """(name, assignment target): the target is annotated on the name's first use."""
        name, first = self.local(base, typ)
        return name, f"{name}: {typ}" if first else name


class DecodeGen(_Gen):
    def function(self, name: str) -> list[str]:
        self.w(1, f"o = _new({self.msg.root.alias})")
        self.struct_body(self.msg.root, "o", 1, 0)
        self.w(1, "return o, pos")
        head = [f"def {name}(buf: _Buffer, pos: int) -> tuple[{self.msg.root.qualname}, int]:"]
        if any("blen" in line for line in self.lines):
            head.append("    blen = len(buf)")
        if self.uses_mv:
            head.append("    mv = buf if buf.__class__ is memoryview else memoryview(buf)")
        return head + self.lines

    # -- structs --

    def struct_body(self, sd: StructDef, tgt: str, ind: int, depth: int) -> None:
        present = sd.present(self.v)
        i = 0
        while i < len(present):
            f = present[i]
            if f.is_fixed:
                j = i
                while j < len(present) and present[j].is_fixed:
                    j += 1
                self.fixed_group([(x, f"{tgt}.{x.name}") for x in present[i:j]], ind)
                i = j
                continue
            self.field(f, f"{tgt}.{f.name}", ind, depth)
            i += 1
        for f in sd.fields:
            if f in present:
                continue
            if lazy(f):
                self.w(ind, f"{tgt}.{slot(f)} = None")
            else:
                self.w(ind, f"{tgt}.{f.name} = {default_expr(f)}")
        if self.flex:
            self.tags(sd, tgt, ind, depth)
        elif self.has_tags:
            self.w(ind, f"{tgt}.unknown_tags = {{}}")

    def fixed_group(self, group: list[tuple[FieldDef, str]], ind: int) -> None:
        fmt = "".join(FIXED[f.type][0] for f, _ in group)
        size = sum(FIXED[f.type][1] for f, _ in group)
        targets: list[str] = []
        uuids: list[tuple[str, str]] = []
        for k, (f, dest) in enumerate(group):
            if f.type == "uuid":
                hi, lo = f"uh{k}", f"ul{k}"
                targets += [hi, lo]
                uuids.append((dest, f"_uuid({hi} << 64 | {lo})"))
            else:
                targets.append(dest)
        lhs = ", ".join(targets) + ("," if len(targets) == 1 else "")
        self.w(ind, f"{lhs} = _U_{self.mod.st(fmt)}(buf, pos); pos += {size}")
        for dest, expr in uuids:
            self.w(ind, f"{dest} = {expr}")

    def field(self, f: FieldDef, dest: str, ind: int, depth: int) -> None:
        if f.array:
            self.array(f, dest, ind, depth)
        elif f.is_fixed:
            self.fixed_group([(f, dest)], ind)
        else:
            self.single(f, dest, ind, depth)

    def single(self, f: FieldDef, dest: str, ind: int, depth: int) -> None:
        """A non-array, non-fixed value (string, bytes, records, varint, struct)."""
        if f.type in ("string", "bytes", "records"):
            self.varlen(f.type, f.nullable(self.v), dest, ind)
        elif f.type == "varint":
            self.w(ind, f"{dest}, pos = _read_varint(buf, pos)")
        elif f.type == "varlong":
            self.w(ind, f"{dest}, pos = _read_varlong(buf, pos)")
        elif f.type == "struct":
            assert f.struct is not None
            if f.nullable(self.v):
                self.w(ind, "n, = _U_b(buf, pos); pos += 1")
                self.mod.st("b")
                self.w(ind, f"if n < 0: {dest} = None")
                self.w(ind, "else:")
                ind += 1
            e, _ = self.local(f"e{depth + 1}", f.struct.qualname)
            self.w(ind, f"{e} = _new({f.struct.alias})")
            self.struct_body(f.struct, e, ind, depth + 1)
            self.w(ind, f"{dest} = {e}")
        else:
            raise AssertionError(f.type)

    def count(self, width: str, ind: int, big: bool = False) -> None:
        """Emit code leaving a length/count in ``n`` (-1 = null).

        ``big``: lengths usually past 127 (records), so the 2-byte varint is inlined too.
        """
        if self.flex:
            self.w(ind, "n = buf[pos]")
            self.w(ind, "if n < 128: pos += 1")
            if big:
                self.w(
                    ind, "elif buf[pos + 1] < 128: n = (n & 127) | (buf[pos + 1] << 7); pos += 2"
                )
            self.w(ind, "else: n, pos = _ruv(buf, pos)")
            self.w(ind, "n -= 1")
        else:
            size = 2 if width == "h" else 4
            self.w(ind, f"n, = _U_{self.mod.st(width)}(buf, pos); pos += {size}")

    def varlen(self, typ: str, nullable: bool, dest: str, ind: int) -> None:
        self.count("h" if typ == "string" else "i", ind, big=typ == "records")
        if typ == "string":
            value = "str(buf[pos:end], 'utf-8')"
        elif typ == "bytes":
            value = "bytes(buf[pos:end])"
        else:
            value = "mv[pos:end]"
            self.uses_mv = True
        if nullable:
            self.w(ind, f"if n == -1: {dest} = None")
            self.w(ind, "else:")
            ind += 1
        self.w(ind, "end = pos + n")
        self.w(ind, "if n < 0 or end > blen: raise _bad_length(n)")
        self.w(ind, f"{dest} = {value}; pos = end")

    def array(self, f: FieldDef, dest: str, ind: int, depth: int) -> None:
        self.count("i", ind)
        if not optional(f):
            # Null in no version: a -1 count is refused, as Kafka's own readers refuse it
            # ("non-nullable field ... was serialized as null").
            self.w(ind, f"if n < 0: raise _null_array(n, {f.name!r})")
        else:
            # The field's type admits None: a -1 count is null (also in a version where the
            # array cannot be null, leniently).
            if self.flex:
                self.w(ind, f"if n < 0: {dest} = None")
            else:
                self.w(ind, "if n < 0:")
                self.w(ind + 1, "if n != -1: raise _bad_length(n)")
                self.w(ind + 1, f"{dest} = None")
            self.w(ind, "else:")
            ind += 1
        fixed = f.type in FIXED and f.type != "uuid"
        m = _min_size(f, self.v, self.flex, as_element=True)
        if fixed:
            pass  # unpack_from itself refuses a count past the end of the buffer
        elif m == 1:
            self.w(ind, "if n > blen - pos: raise _bad_count(n)")
        elif m > 1:
            self.w(ind, f"if n * {m} > blen - pos: raise _bad_count(n)")
        if fixed:
            code, size = FIXED[f.type]
            self.mod.unpack_arrays.add(code)
            name = fmt_name(code)
            self.w(ind, f"if n < {TABLE}: {dest} = list(_UA_{name}[n](buf, pos))")
            self.w(ind, f"else: {dest} = list(_unpack_from('>%d{code}' % n, buf, pos))")
            self.w(ind, f"pos += n * {size}")
            return
        lv, target = self.bind(f"l{depth}", f"list[{elem_type(f)}]")
        av = "a" + lv[1:]
        self.w(ind, f"{target} = []; {av} = {lv}.append")
        self.w(ind, "for _ in range(n):")
        if f.type == "struct":
            assert f.struct is not None
            e, _ = self.local(f"e{depth + 1}", f.struct.qualname)
            self.w(ind + 1, f"{e} = _new({f.struct.alias})")
            self.struct_body(f.struct, e, ind + 1, depth + 1)
            self.w(ind + 1, f"{av}({e})")
        elif f.type == "uuid":
            self.w(ind + 1, f"uh0, ul0 = _U_{self.mod.st('QQ')}(buf, pos); pos += 16")
            self.w(ind + 1, f"{av}(_uuid(uh0 << 64 | ul0))")
        else:
            elem = FieldDef(f.name, f.type, False, f.versions)
            x, _ = self.local("x", elem_type(f))  # typed by its first assignment
            self.single(elem, x, ind + 1, depth)
            self.w(ind + 1, f"{av}({x})")
        self.w(ind, f"{dest} = {lv}")

    def tags(self, sd: StructDef, tgt: str, ind: int, depth: int) -> None:
        tagged = sd.tagged(self.v)
        if not tagged:
            self.w(ind, f"if buf[pos] == 0: pos += 1; {tgt}.unknown_tags = {{}}")
            self.w(ind, f"else: {tgt}.unknown_tags, pos = _read_tags(buf, pos)")
            return
        d = depth
        self.w(ind, f"nt{d} = buf[pos]")
        self.w(ind, f"if nt{d} < 128: pos += 1")
        self.w(ind, f"else: nt{d}, pos = _ruv(buf, pos)")
        _, target = self.bind(f"ut{d}", "dict[int, bytes]")
        self.w(ind, f"{target} = {{}}")
        self.w(ind, f"for _ in range(nt{d}):")
        ind += 1
        self.w(ind, f"tg{d}, pos = _ruv(buf, pos)")
        self.w(ind, f"sz{d}, pos = _ruv(buf, pos)")
        self.w(ind, f"tend{d} = pos + sz{d}")
        self.w(ind, f"if tend{d} > blen: raise _bad_length(sz{d})")
        for k, f in enumerate(tagged):
            self.w(ind, f"{'if' if k == 0 else 'elif'} tg{d} == {f.tag}:")
            self.field(f, f"{tgt}.{slot(f)}", ind + 1, depth + 1)
            self.w(ind + 1, f"if pos != tend{d}: raise _bad_tag_size(tg{d})")
        self.w(ind, f"else: ut{d}[tg{d}] = bytes(buf[pos:tend{d}]); pos = tend{d}")
        self.w(ind - 1, f"{tgt}.unknown_tags = ut{d}")


class EncodeGen(_Gen):
    def function(self, name: str) -> list[str]:
        self.struct_body(self.msg.root, "o", 1, 0, "ap")
        if not self.lines:
            self.w(1, "pass")
        return [f"def {name}(o: {self.msg.root.qualname}, ap: _Append) -> None:"] + self.lines

    def struct_body(self, sd: StructDef, src: str, ind: int, depth: int, ap: str) -> None:
        present = sd.present(self.v)
        i = 0
        while i < len(present):
            f = present[i]
            if f.is_fixed:
                j = i
                while j < len(present) and present[j].is_fixed:
                    j += 1
                self.fixed_group([(x, f"{src}.{x.name}") for x in present[i:j]], ind, ap)
                i = j
                continue
            self.field(f, f"{src}.{f.name}", ind, depth, ap, optional(f))
            i += 1
        if self.flex:
            self.tags(sd, src, ind, depth, ap)

    def fixed_group(self, group: list[tuple[FieldDef, str]], ind: int, ap: str) -> None:
        fmt = "".join(FIXED[f.type][0] for f, _ in group)
        args: list[str] = []
        for f, expr in group:
            if f.type == "uuid":
                args += [f"{expr}.int >> 64", f"{expr}.int & _M64"]
            else:
                args.append(expr)
        self.w(ind, f"{ap}(_P_{self.mod.st(fmt)}({', '.join(args)}))")

    def field(
        self, f: FieldDef, expr: str, ind: int, depth: int, ap: str, maybe_none: bool
    ) -> None:
        """Write ``expr``; ``maybe_none``: its static type admits None."""
        if f.array:
            self.array(f, expr, ind, depth, ap)
        elif f.is_fixed:
            self.fixed_group([(f, expr)], ind, ap)
        else:
            self.single(f, expr, ind, depth, ap, maybe_none)

    def length(self, n_expr: str, width: str, ind: int, ap: str) -> None:
        if self.flex:
            self.w(ind, f"n = {n_expr} + 1; {ap}(_UV1[n] if n < 128 else _uvb(n))")
        else:
            self.w(ind, f"{ap}(_P_{self.mod.st(width)}({n_expr}))")

    def null(self, width: str) -> str:
        if self.flex:
            return "b'\\x00'"
        return "b'\\xff\\xff'" if width == "h" else "b'\\xff\\xff\\xff\\xff'"

    def single(
        self, f: FieldDef, expr: str, ind: int, depth: int, ap: str, maybe_none: bool
    ) -> None:
        nullable = f.nullable(self.v)
        # A T | None value in a version that cannot carry null: the caller must give a T.
        strict = "" if nullable or not maybe_none else "  # type: ignore[{}]"
        if f.type == "records":
            self.w(
                ind, f"{'_write_compact_records' if self.flex else '_write_records'}({ap}, {expr})"
            )
        elif f.type in ("string", "bytes"):
            width = "h" if f.type == "string" else "i"
            if nullable:
                z, target = self.bind("sn" if f.type == "string" else "bn", version_type(f, self.v))
                self.w(ind, f"{target} = {expr}")
                self.w(ind, f"if {z} is None: {ap}({self.null(width)})")
                self.w(ind, "else:")
                ind += 1
                if f.type == "string":
                    sn = z
                    z, target = self.bind("s", "bytes")
                    self.w(ind, f"{target} = {sn}.encode()")
            else:
                z, target = self.bind("s", "bytes")
                if f.type == "string":
                    self.w(ind, f"{target} = {expr}.encode(){strict.format('union-attr')}")
                else:
                    self.w(ind, f"{target} = {expr}{strict.format('assignment')}")
            self.length(f"len({z})", width, ind, ap)
            self.w(ind, f"{ap}({z})")
        elif f.type == "varint":
            self.w(ind, f"{ap}(_varint_bytes({expr}))")
        elif f.type == "varlong":
            self.w(ind, f"{ap}(_varlong_bytes({expr}))")
        elif f.type == "struct":
            assert f.struct is not None
            e, target = self.bind(f"e{depth + 1}", version_type(f, self.v))
            self.w(ind, f"{target} = {expr}{strict.format('assignment')}")
            if nullable:
                self.w(ind, f"if {e} is None: {ap}(b'\\xff')")
                self.w(ind, "else:")
                ind += 1
                self.w(ind, f"{ap}(b'\\x01')")
            self.struct_body(f.struct, e, ind, depth + 1, ap)
        else:
            raise AssertionError(f.type)

    def array(self, f: FieldDef, expr: str, ind: int, depth: int, ap: str) -> None:
        lv, target = self.bind(f"l{depth}", attr_type(f))
        self.w(ind, f"{target} = {expr}")
        if optional(f):  # else a list, never null (None fails as ProtocolError, as in Kafka)
            self.w(ind, f"if {lv} is None: {ap}({self.null('i')})")
            self.w(ind, "else:")
            ind += 1
        if f.type in FIXED and f.type != "uuid":
            code = FIXED[f.type][0]
            self.mod.pack_arrays.add(code)
            name = fmt_name(code)
            self.w(ind, f"c = len({lv})")
            self.length("c", "i", ind, ap)
            self.w(ind, f"if c < {TABLE}: {ap}(_PA_{name}[c](*{lv}))")
            self.w(ind, f"else: {ap}(_pack('>%d{code}' % c, *{lv}))")
            return
        self.length(f"len({lv})", "i", ind, ap)
        x, _ = self.local(f"x{depth}", elem_type(f))  # typed by the loop
        self.w(ind, f"for {x} in {lv}:")
        if f.type == "struct":
            assert f.struct is not None
            self.struct_body(f.struct, x, ind + 1, depth + 1, ap)
        elif f.type == "uuid":
            self.fixed_group([(f, x)], ind + 1, ap)
        else:
            elem = FieldDef(f.name, f.type, False, f.versions)
            self.single(elem, x, ind + 1, depth + 1, ap, False)

    def differs(self, f: FieldDef, var: str) -> str:
        if f.array:
            return var
        if f.type == "struct":
            if f.default is None:
                return f"{var} is not None"
            assert f.struct is not None
            subs = f.struct.fields
            if all(not x.array and x.type != "struct" for x in subs):
                # Inline comparison with the defaults (cheaper than the generated __eq__).
                checks = [self.differs(x, f"{var}.{x.name}") for x in subs]
                if self.has_tags:
                    checks.append(f"{var}.unknown_tags")
                return f"{var} is not None and ({' or '.join(checks) or 'False'})"
            return f"{var} is not None and {var} != {self.mod.default_instance(f.struct)}"
        if f.default is None:
            return f"{var} is not None"
        if f.type == "boolean":
            return var if not f.default else f"not {var}"
        return f"{var} != {default_expr(f)}"

    def tags(self, sd: StructDef, src: str, ind: int, depth: int, ap: str) -> None:
        tagged = sd.tagged(self.v)
        d = depth
        if not tagged:
            self.w(ind, f"ut{d} = {src}.unknown_tags")
            self.w(ind, f"if ut{d}: _write_tags({ap}, ut{d}.items())")
            self.w(ind, f"else: {ap}(b'\\x00')")
            return
        _, target = self.bind(f"tl{d}", "list[tuple[int, bytes]]")
        self.w(ind, f"{target} = []")
        for f in tagged:
            tv, target = self.bind(f"tv{d}", slot_type(f))
            self.w(ind, f"{target} = {src}.{slot(f)}")
            self.w(ind, f"if {self.differs(f, tv)}:")
            tp, target = self.bind(f"tp{d}", "list[bytes]")
            tap = "tap" + tp[2:]
            self.w(ind + 1, f"{target} = []; {tap} = {tp}.append")
            # differs() has ruled out None unless the field is a scalar with a value default
            narrowed = f.array or f.type == "struct" or f.default is None
            self.field(f, tv, ind + 1, depth + 1, tap, optional(f) and not narrowed)
            self.w(ind + 1, f"tl{d}.append(({f.tag}, b''.join({tp})))")
        self.w(ind, f"ut{d} = {src}.unknown_tags")
        self.w(ind, f"if ut{d}: tl{d}.extend(ut{d}.items())")
        self.w(ind, f"if tl{d}: _write_tags({ap}, tl{d})")
        self.w(ind, f"else: {ap}(b'\\x00')")


def functions(mod: Module, msg: MessageDef, kind: str) -> tuple[list[str], dict[int, str]]:
    """Decode or encode functions for all versions, identical layouts shared."""
    bodies: dict[str, str] = {}
    table: dict[int, str] = {}
    out: list[str] = []
    tag = "req" if msg.kind == "request" else "resp"
    for v in msg.versions:
        gen = DecodeGen(mod, msg, v) if kind == "decode" else EncodeGen(mod, msg, v)
        lines = gen.function("NAME")
        key = "\n".join(lines)
        if key not in bodies:
            name = f"_{kind}_{tag}_v{v}"
            bodies[key] = name
            out.append("")
            out.append("")
            out.append(lines[0].replace("NAME", name))
            out.extend(lines[1:])
        table[v] = bodies[key]
    return out, table
