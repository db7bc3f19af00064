// A workspace's chat widget settings, as the widget builder sets them (stream `widget-<workspace>`,
// internal events). One so far: whether visitors are notified of operator replies they have not
// seen (visitor.reply_waiting, which the contract sends only while this is on). Off until turned on.
import { right } from 'fp-ts/lib/Either.js';
import type { Aggregate } from '../aggregate.js';

export const WIDGET_SETTINGS_SET = 'widget.settings_set';

export const widgetStream = (workspaceId: string): string => `widget-${workspaceId}`;

export interface WidgetSettings {
  readonly visitorNotifications: boolean;
}

export const widgetAggregate: Aggregate<WidgetSettings, WidgetSettings> = {
  initial: { visitorNotifications: false },
  evolve: (state, { type, data }) => (type === WIDGET_SETTINGS_SET ? { visitorNotifications: data['visitor_notifications'] === true } : state),
  // Setting what is already set records nothing.
  decide: (command, state) => right(command.visitorNotifications === state.visitorNotifications ? [] : [{ type: WIDGET_SETTINGS_SET, data: { visitor_notifications: command.visitorNotifications } }]),
};
