// Types of scened.mjs, scened's JavaScript client (protocol 1).

/** The protocol's error codes, and CLOSED (the connection went), BAD_BASE64 (a matrix or
 * payload text that is not base64 of the right length) and BAD_PACKED (a packed payload or
 * binary message this module refuses). */
export type ErrorCode =
  | 'BAD_JSON' | 'BAD_REQUEST' | 'UNKNOWN_COMMAND' | 'NOT_FOUND' | 'ALREADY_EXISTS' | 'CYCLE'
  | 'LIMIT' | 'UNAUTHORIZED' | 'INTERNAL' | 'MOVED' | 'UNAVAILABLE' | 'CLOSED' | 'BAD_BASE64'
  | 'BAD_PACKED';

export class ScenedError extends Error {
  readonly code: ErrorCode | string;
  /** The error response, when the daemon sent one. */
  readonly response?: Response;
  /** BAD_PACKED of a payload: the offset of the byte where the bad value starts. */
  readonly at?: number;
}

/** How the daemon sends a connection matrices. */
export type MatrixForm = 'json' | 'b64';

/** 16 numbers, column-major (elements 12, 13, 14 are the translation). */
export type Matrix = ArrayLike<number>;

/** A response: "ok" true, the request's "id", and the command's result fields. */
export interface Response {
  ok: boolean;
  id?: unknown;
  [field: string]: unknown;
}

/** A frame: the set as ids and one Float32Array (matrix i at 16 * i), whichever form it came
 * in, and the removed ids. */
export interface Frame {
  sub: number;
  world: string;
  tick: number;
  full: boolean;
  ids: number[];
  matrices: Float32Array;
  removed: number[];
  /** Milliseconds spent reading it (parsing, decoding, updating the mirror). */
  readMs: number;
}

export function matrixToB64(m: Matrix): string;
export function matrixFromB64(s: string): Float32Array;
export function matrixOf(value: string | number[]): Float32Array;
export function decodeMatrices(ms: string, count: number): Float32Array;

/** Where PackedState.decode hands a payload: reserve(n) (when there) with the number of
 * entries; put(id) for each entry, in increasing id, returning the offset in matrices (read
 * after the call, as it may grow) where the decoder writes its 16 floats; remove(id) for each
 * removed id; clear() (when there) before a full frame's entries. */
export interface PackedSink {
  readonly matrices: Float32Array;
  put(id: number): number;
  remove(id: number): void;
  reserve?(n: number): void;
  clear?(): void;
}

/** A packed subscription's grid: the translation quantum and the origin of q = 0. */
export interface Packed {
  /** Positive, finite (e.g. 0.001). */
  step: number;
  /** [0, 0, 0] by default. */
  origin?: [number, number, number];
}

/** What a packed subscription last received of one entity. */
export interface PackedValue {
  /** The translation in steps from the origin; null once the grid changed (the next is
   * absolute). */
  q: [number, number, number] | null;
  /** Smallest three. */
  rotation: number;
  scale: [number, number, number];
}

/** Decodes packed payloads (CONTRACT, "Packed frames") against what a subscription last
 * received per entity. Translations are taken up to 2^53 - 1 steps from the origin in
 * magnitude (absolute or after a delta); a payload past that is refused. */
export class PackedState {
  /** Throws a TypeError on a step that is not positive and finite or an origin that is not
   * three finite numbers. */
  constructor(step: number, origin?: ArrayLike<number>);
  readonly step: number;
  readonly origin: [number, number, number];
  /** Entities held. */
  readonly size: number;
  has(id: number): boolean;
  value(id: number): PackedValue | null;
  /** A new step or origin forgets every translation when either changed (rotations and scales
   * stay); an invalid one throws a TypeError and changes nothing. */
  setGrid(step: number, origin?: ArrayLike<number>): void;
  /** Forgets every entity. */
  clear(): void;
  /** Decodes a payload into sink and brings the state up to it, or throws a ScenedError
   * (BAD_PACKED) having changed nothing, neither the state nor the sink. full: read as if
   * nothing were held; the state and the sink are emptied first. */
  decode(payload: Uint8Array, sink: PackedSink, full?: boolean): { entries: number; removed: number };
}

/** A PackedSink that collects a frame's ids, matrices (matrix i at 16 * i) and removed ids. */
export class PackedFrameSink implements PackedSink {
  readonly ids: number[];
  readonly matrices: Float32Array;
  readonly removed: number[];
  put(id: number): number;
  remove(id: number): void;
  reserve(n: number): void;
}

/** A binary WebSocket message (a packed frame) taken apart: sub u32, tick u64, flags u8 (bit 0:
 * full), little-endian, then the payload (a view of the same bytes). Throws a ScenedError
 * (BAD_PACKED) on fewer than 13 bytes, a tick past 2^53 - 1 or unknown flags. */
export function parsePackedMessage(bytes: Uint8Array): { sub: number; tick: number; full: boolean; payload: Uint8Array };

/** The payload of a JSON packed frame ("packed", base64 with padding); throws a ScenedError
 * (BAD_BASE64) when it is not base64. */
export function packedFromB64(s: string): Uint8Array;

/** A world's world matrices kept from frames: ids[slot] has its matrix at 16 * slot. A
 * PackedSink: packed frames are decoded straight into matrices. */
export class Mirror implements PackedSink {
  readonly ids: number[];
  readonly slots: Map<number, number>;
  readonly matrices: Float32Array;
  readonly tick: number;
  readonly frames: number;
  readonly size: number;
  has(id: number): boolean;
  /** A view valid until the next frame, or null. */
  matrix(id: number): Float32Array | null;
  apply(frame: Frame): void;
  /** The offset in matrices of id's matrix, a slot added when it has none. */
  put(id: number): number;
  /** Room for n more matrices. */
  reserve(n: number): void;
  remove(id: number): void;
  clear(): void;
}

/** How a subscription ended. After world_destroyed, root_destroyed and center_destroyed its
 * mirror is empty. bad_frame: a frame this module could not decode (the event's error says
 * why); the mirror keeps the last good frame and the module unsubscribes. */
export type EndReason =
  | 'world_destroyed' | 'root_destroyed' | 'center_destroyed' | 'unsubscribed' | 'closed'
  | 'bad_frame' | string;

/** A rate by distance: entities in scope within radius are sent at most hz times a second. */
export interface Band {
  radius: number;
  hz: number;
}

/** What the region's center is: a fixed point, or an entity whose world translation it follows. */
export type NearCenter = { point: [number, number, number]; entity?: never } | { entity: number; point?: never };

/** A region: in scope within radius of the center, and kept until beyond radius + margin. */
export type Near = NearCenter & {
  /** Positive, finite. */
  radius: number;
  /** 0 or more (0 by default). */
  margin?: number;
  /** Radii strictly increasing, hz positive. */
  bands?: Band[];
};

export interface SubscribeOptions {
  root?: number;
  hz?: number;
  /** Only what is near a point or an entity (with root, what satisfies both). */
  near?: Near;
  /** Packed frames: binary WebSocket messages of quantized transforms on this grid. */
  packed?: Packed;
  /** false: keep no mirror. */
  mirror?: boolean;
  onFrame?: (frame: Frame, sub: Subscription) => void;
  onEnd?: (reason: EndReason, event?: Record<string, unknown>) => void;
  /** Any other field is sent with the request as it is. */
  [field: string]: unknown;
}

/** subscribe.update's fields: a region, or null to remove it; a new grid for a packed
 * subscription (origin [0, 0, 0] when left out). */
export interface SubscriptionUpdate {
  near?: Near | null;
  packed?: Packed;
  [field: string]: unknown;
}

export class Subscription {
  readonly id: number;
  readonly world: string;
  /** The region asked for (subscribe, then each update), or null. */
  readonly near: Near | null;
  /** A packed subscription's state (its step and origin follow each update), else null. */
  readonly packed: PackedState | null;
  readonly mirror: Mirror | null;
  readonly ended: EndReason | null;
  /** subscribe.update: no full frame follows; the next one carries what came and what left. */
  update(fields: SubscriptionUpdate): Promise<Response>;
  unsubscribe(): Promise<void>;
}

export interface OpenOptions {
  /** A WebSocket class, for runtimes without a global one (Node: the ws package, by default). */
  WebSocket?: unknown;
  [socketOption: string]: unknown;
}

export interface ConnectOptions extends OpenOptions {
  token?: string;
  /** 'b64' by default. */
  matrices?: MatrixForm;
  /** hello's follower_reads: in a cluster with replicas, a daemon that follows a world's group
   * answers transform.get, .children, .find, .relative and subscribe from its copy (which may
   * lag the owner) instead of MOVED. */
  followerReads?: boolean;
}

/** Parts of a matrix (transform.get with trs): translation, unit quaternion (w >= 0), scale. */
export interface Trs {
  t: [number, number, number];
  r: [number, number, number, number];
  s: [number, number, number];
}

export interface GetOptions {
  /** A past tick of a world with history: from now - history + 1 to now (now: the tick a get
   * without one answers). Not an integer: interpolated between the two ticks around it.
   * Outside the window, or in a world without history: NOT_FOUND. */
  tick?: number;
  /** Also answer local_trs and world_trs. */
  trs?: boolean;
}

/** transform.get's answer with its matrices decoded (whichever form they came in). */
export interface Transform {
  ok: true;
  id?: unknown;
  /** The tick asked for, or without one the last tick that has run. */
  tick: number;
  entity: number;
  parent: number | null;
  name?: string;
  local: Float32Array;
  world: Float32Array;
  /** With trs: null when that matrix is not translation x rotation x scale. */
  local_trs?: Trs | null;
  world_trs?: Trs | null;
}

export class Client {
  static open(url: string, options?: OpenOptions): Promise<Client>;
  readonly matrices: MatrixForm;
  readonly isOpen: boolean;
  /** Requests sent so far. */
  readonly sent: number;
  onclose: ((event: unknown) => void) | null;
  /** Events of no subscription of this client. */
  onevent: ((event: Record<string, unknown>) => void) | null;
  call(cmd: string, fields?: Record<string, unknown>): Promise<Response>;
  hello(options?: { token?: string; matrices?: MatrixForm; followerReads?: boolean }): Promise<Response>;
  subscribe(world: string, options?: SubscribeOptions): Promise<Subscription>;
  /** subscribe.update of one of this connection's subscriptions (or its id). */
  updateSubscription(sub: Subscription | number, fields: SubscriptionUpdate): Promise<Response>;
  /** transform.get, now or at a past tick. */
  get(world: string, entity: number, options?: GetOptions): Promise<Transform>;
  /** transform.relative: inverse(world(to)) * world(entity), now or at a past tick. */
  relative(world: string, entity: number, to: number, options?: { tick?: number }): Promise<Float32Array>;
  /** get for many entities, pipelined (at most inFlight waiting, 256 by default); null for an
   * entity that answered NOT_FOUND (all null when the tick is outside the window). */
  getMany(world: string, entities: number[], options?: GetOptions & { inFlight?: number }): Promise<(Transform | null)[]>;
  close(code?: number): void;
}

export function connect(url: string, options?: ConnectOptions): Promise<Client>;
