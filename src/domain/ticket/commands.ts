// Commands on a ticket. Every command names the ticket and the caller's workspace (another
// workspace's ticket is "not found") and carries the time, in microseconds, so decide stays pure.
import type { TicketPriority, TicketStatus, SenderType } from '../catalogue.js';

export interface MediaItem {
  readonly id: string;
  readonly url: string;
  readonly file_name: string;
  readonly content_type: string;
  readonly size: number;
}

export interface NewMessage {
  readonly messageId: string;
  readonly senderType: SenderType;
  readonly senderId: string | null;
  readonly senderName: string | null;
  readonly content: string;
  readonly media: readonly MediaItem[];
  readonly isInternal: boolean;
}

interface Base {
  readonly ticketId: string;
  readonly workspaceId: string;
  readonly now: number;
}

export type TicketCommand = Base &
  (
    | { readonly kind: 'create'; readonly contactId: string; readonly subject: string | null; readonly priority: TicketPriority; readonly message: NewMessage | null }
    | { readonly kind: 'update'; readonly subject?: string | null; readonly priority?: TicketPriority; readonly status?: TicketStatus }
    | { readonly kind: 'close' }
    | { readonly kind: 'reopen' }
    /** `comment` is there (null when none was given) for a rating through the API, absent for the widget's. */
    | { readonly kind: 'rate'; readonly rating: number; readonly comment?: string | null }
    | { readonly kind: 'assign'; readonly operatorId: string; readonly operatorName: string; readonly operatorAvatarUrl: string | null }
    | { readonly kind: 'transfer'; readonly departmentId: string; readonly departmentName: string; readonly operatorId: string | null; readonly operatorName: string | null }
    | { readonly kind: 'force_take'; readonly operatorId: string }
    | { readonly kind: 'post_message'; readonly message: NewMessage }
    | { readonly kind: 'edit_message'; readonly messageId: string; readonly content: string }
    | { readonly kind: 'add_reaction'; readonly messageId: string; readonly reactorKind: string; readonly reactorId: string; readonly emoji: string }
    | { readonly kind: 'remove_reaction'; readonly messageId: string; readonly reactorId: string }
  );

export type CommandOf<K extends TicketCommand['kind']> = Extract<TicketCommand, { kind: K }>;
